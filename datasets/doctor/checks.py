"""The duplicates check as a worker runs it (datasets.tasks.check_duplicates) and the command
line does (idempotent: a second run rewrites the same report), and the reads of a dataset's report
for its page, the API and the command."""

from __future__ import annotations

import logging

from datasets.doctor import report
from datasets.models import Dataset
from trainer.datum import DatumError

log = logging.getLogger(__name__)


def duplicates_run(*, dataset_id: int) -> dict | None:
    """Scans a ready dataset and writes its report; None when the dataset is gone or not ready."""
    dataset = Dataset.objects.filter(pk=dataset_id, status=Dataset.Status.READY).first()
    if dataset is None:
        return None
    folder = dataset.path
    try:
        found = report.scan(folder)
    except DatumError as error:  # a damaged database: said on the page, not a worker's traceback
        found = {"error": f"could not read every image: {error}"}
    except OSError as error:
        log.exception("dataset %s: the duplicates check failed", dataset_id)
        found = {"error": f"could not read the dataset ({error.strerror or 'I/O error'})"}
    finally:
        report.clear_checking(folder)
    if folder.is_dir():  # deleted meanwhile: nothing to write into
        report.write(folder, found)
    return found


def duplicates_wanted_after_build(*, dataset_id: int) -> bool:
    """Whether a dataset just built wants its first duplicates check (marked as being checked
    now, so that its page says so at once); False when it did not build or has a report."""
    dataset = Dataset.objects.filter(pk=dataset_id, status=Dataset.Status.READY).first()
    if dataset is None or report.read(dataset.path) is not None or report.checking(dataset.path):
        return False
    report.mark_checking(dataset.path)
    return True


def duplicates_state(dataset: Dataset) -> dict:
    """{"state": "not checked" | "checking" | "done" | "failed", "report": ... | None}."""
    if dataset.status != Dataset.Status.READY:
        return {"state": "not checked", "report": None}
    found = report.read(dataset.path)
    if report.checking(dataset.path):
        return {"state": "checking", "report": found}
    if found is None:
        return {"state": "not checked", "report": None}
    return {"state": "failed" if "error" in found else "done", "report": found}


def duplicates_for_page(dataset: Dataset, *, shown: int = 12) -> dict:
    """duplicates_state with the first `shown` pairs (leaks first) and their thumbnails."""
    state = duplicates_state(dataset)
    found = state["report"]
    pairs = found.get("pairs", [])[:shown] if found else []
    return {**state, "shown": report.with_thumbnails(dataset.path, pairs) if pairs else []}
