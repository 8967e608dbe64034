"""A label check's writes: start it (its folds' folders and runs, through the one queue), follow
its runs to the suspects, abort, pause or resume them all, and fix the labels it doubts as a new
dataset version (datasets.services.version_create)."""

from __future__ import annotations

import logging
import shutil

from django.db import transaction
from django.utils import timezone

from datasets import versions
from datasets.models import Dataset
from datasets.services import version_create
from workbench.audit import services as audit
from workbench.core.errors import RequestError
from workbench.labelchecks import folds as fold_files
from workbench.labelchecks.models import LabelCheck, LabelCheckFold
from workbench.labelchecks.validators import check_dataset, check_folds, check_network, check_pool
from workbench.projects.selectors import project_of_new_work
from workbench.runs import services as runs
from workbench.runs.models import Run

log = logging.getLogger(__name__)


def label_check_start(
    *, owner, dataset: Dataset, network: str, config: dict, folds=None, gpus="auto", version: int | None = None
) -> LabelCheck:
    """Checks the request, writes each fold's folder and submits its run (checked as any run);
    all or nothing. `version`: the dataset's version to check (default its latest)."""
    check_dataset(dataset)
    folds = check_folds(folds)
    network = check_network(network, task=dataset.task)
    chosen = versions.latest_version(dataset) if version is None else dataset.versions.filter(number=version).first()
    if chosen is None:
        raise RequestError("version", f"dataset {dataset.pk} has no version {version}" if version else "not built yet")
    try:
        records = versions.records_of(dataset)
        contents = versions.contents_of(chosen, records)
    except (OSError, ValueError, KeyError):
        log.exception("dataset %s: its records cannot be read for a label check", dataset.pk)
        raise RequestError("dataset", f"dataset {dataset.pk}'s build cannot be read: build it again") from None
    pool = fold_files.pool_of(contents)
    labels = [fold_files.label_of(place, contents, records) for place in pool]
    check_pool(images=len(pool), classes_used=len(set(labels)), folds=folds)
    config = {**config, "heldout_predictions": True}
    check = None
    try:
        with transaction.atomic():
            project = project_of_new_work(owner=owner, dataset=dataset)
            check = LabelCheck.objects.create(
                owner=owner,
                project=project,
                dataset=dataset,
                version=chosen,
                network=network,
                folds=folds,
                config=config,
            )
            # One deal per version and K: a check repeated on the same data trains the same folds.
            for index, held in enumerate(fold_files.assign(pool, labels, folds, seed=0)):
                _queue_fold(check, index, held, contents=contents, records=records, gpus=gpus)
            after = {"dataset": dataset.pk, "version": chosen.number, "network": network, "folds": folds}
            audit.record(action="labelcheck.start", actor=owner, target=check, after=after)
    except BaseException:
        # A fold run refused (or anything else): the rows roll back, and so do the folds' folders.
        if check is not None:
            shutil.rmtree(check.folder, ignore_errors=True)
        raise
    return check


def _queue_fold(check: LabelCheck, index: int, held: list, *, contents, records: dict, gpus) -> None:
    """Fold `index`'s folder and its run, an ordinary run of the check's owner on that folder."""
    run = runs.run_submit(
        owner=check.owner, dataset=check.dataset, name=f"label check {check.pk}: fold {index + 1} of {check.folds}",
        network=check.network, config=check.config, gpus=gpus, dataset_version=check.version.number,
    )  # fmt: skip
    run.data_folder, places = fold_files.write_fold(check, index, contents, held, records)
    run.save(update_fields=["data_folder"])
    LabelCheckFold.objects.create(label_check=check, index=index, run=run, places=places)


def label_check_refresh(*, check: LabelCheck) -> LabelCheck:
    """Follows the fold runs: a failed or aborted one fails the check, naming it; once all are
    done, the suspects. Idempotent: any reader may call it."""
    if check.is_finished:
        return check
    fold_runs = list(check.fold_runs.select_related("run").order_by("index"))
    for fold in fold_runs:
        if fold.run is None:
            return _finish(check, LabelCheck.State.FAILED, error=f"fold {fold.index + 1}'s run was deleted")
        if fold.run.state in (Run.State.FAILED, Run.State.ABORTED, Run.State.PRUNED):
            why = f"fold {fold.index + 1}'s run #{fold.run.pk} {fold.run.state}"
            return _finish(check, LabelCheck.State.FAILED, error=f"{why}: {fold.run.error}" if fold.run.error else why)
    if not fold_runs or any(fold.run.state != Run.State.DONE for fold in fold_runs):
        return check
    records = versions.records_of(check.dataset)
    try:
        report = fold_files.collect(check, versions.contents_of(check.version, records), records)
    except (OSError, ValueError) as error:
        log.exception("label check %s: the held-out predictions cannot be read", check.pk)
        return _finish(check, LabelCheck.State.FAILED, error=f"the folds' predictions cannot be read ({error})")
    check.images, check.suspects = report["images"], report["suspects_total"]
    return _finish(check, LabelCheck.State.DONE)


def _finish(check: LabelCheck, state: str, *, error: str = "") -> LabelCheck:
    updated = LabelCheck.objects.filter(pk=check.pk, state=LabelCheck.State.RUNNING).update(
        state=state, error=error[:2000], images=check.images, suspects=check.suspects, finished_at=timezone.now()
    )
    check.refresh_from_db()
    if updated:
        audit.record(action=f"labelcheck.{state}", target=check, after={"suspects": check.suspects, "error": error})
    return check


def label_check_abort(*, check: LabelCheck, by) -> LabelCheck:
    """Aborts every fold run still going; the check ends aborted."""
    if check.is_finished:
        raise RequestError(None, f"label check {check.pk} is {check.state}")
    for fold in check.fold_runs.select_related("run"):
        if fold.run is not None and not fold.run.is_finished:
            runs.run_abort(run=fold.run, by=by)
    return _finish(check, LabelCheck.State.ABORTED, error=f"aborted by {by.get_username()}")


def label_check_pause(*, check: LabelCheck, by, resume: bool = False) -> int:
    """Pauses (or resumes) every fold run that can be; how many did."""
    if check.is_finished:
        raise RequestError(None, f"label check {check.pk} is {check.state}")
    changed = 0
    for fold in check.fold_runs.select_related("run").exclude(run=None):
        try:
            (runs.run_resume if resume else runs.run_pause)(run=fold.run, by=by)
            changed += 1
        except runs.RunError:
            continue  # done already, or not in a state to pause or resume: the others go on
    return changed


ACTIONS = ("accept", "keep", "drop", "relabel")


def label_check_accept(*, check: LabelCheck, by, images: list | None = None, decisions: list | None = None):
    """A new version of the checked one with the person's decisions on the check's suspects:
    `decisions` [{"image": [split, index], "action": accept | keep | drop | relabel, "label"?}],
    or `images` ([split, index] pairs) whose suggestions are accepted; neither: every suggestion."""
    report = fold_files.read_report(check)
    if check.state != LabelCheck.State.DONE or report is None:
        raise RequestError(None, f"label check {check.pk} is {check.state}: it has no suspects yet")
    suggested = {(row["image"]["split"], row["image"]["index"]): row["suggested"] for row in report["suspects"]}
    if decisions is None:
        wanted = list(suggested) if images is None else [_place(item, suggested, "images") for item in images]
        decisions = [{"image": list(place), "action": "accept"} for place in wanted]
    if not isinstance(decisions, list):
        raise RequestError("decisions", "give a list of {image: [split, index], action, label?}")
    fixes, counts = [], {action: 0 for action in ACTIONS}
    for number, decision in enumerate(decisions):
        where = f"decisions.{number}"
        if not isinstance(decision, dict) or decision.get("action") not in ACTIONS:
            raise RequestError(where, f"each decision is {{image, action: {' | '.join(ACTIONS)}, label?}}")
        split, index = _place(decision.get("image"), suggested, f"{where}.image")
        counts[decision["action"]] += 1
        if decision["action"] == "drop":
            fixes.append({"op": "drop", "split": split, "index": index})
        elif decision["action"] != "keep":
            label = suggested[(split, index)] if decision["action"] == "accept" else decision.get("label")
            fixes.append({"op": "relabel", "split": split, "index": index, "label": label})
    if not fixes:
        raise RequestError("decisions", "nothing to change: every image keeps its label")
    said = [f"{counts['accept'] + counts['relabel']} relabelled", f"{counts['drop']} dropped", f"{counts['keep']} kept"]
    note = f"label check {check.pk}: " + ", ".join(part for part in said if not part.startswith("0 "))
    return version_create(dataset=check.dataset, by=by, fixes=fixes, base=check.version, note=note)


def _place(item, suggested: dict, field: str) -> tuple[str, int]:
    if isinstance(item, list | tuple) and len(item) == 2 and (item[0], item[1]) in suggested:
        return item[0], item[1]
    raise RequestError(field, f"{item!r} is not one of the check's suspects ([split, index])")
