"""Dataset work that spans rows, files and processes: create, queue, cancel, rebuild, delete.

The build itself is datasets.building, run by the task datasets.tasks.build_dataset.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import Counter

from django.db import transaction
from django.db.models import ProtectedError
from django.utils import timezone

from datasets import versions
from datasets.building import remove_partial_build, this_build
from datasets.doctor import report as doctor_report
from datasets.doctor.checks import duplicates_run
from datasets.events import publish
from datasets.models import Dataset, DatasetVersion
from datasets.tasks import build_dataset, check_duplicates
from datasets.uploads import upload_delete
from datasets.validators import clean_fixes
from workbench.audit import services as audit
from workbench.core.errors import RequestError
from workbench.workers.inventory import lost_worker
from workbench.workers.models import WorkerHost

log = logging.getLogger(__name__)

# Fields of Dataset that are build options (what dataset_create accepts in `options`).
OPTION_FIELDS = (
    "task",
    "image_width",
    "image_height",
    "channels",
    "resize_mode",
    "encoding",
    "val_percent",
    "test_percent",
    "min_per_class",
    "max_per_class",
    "shuffle",
    "seed",
)


class DatasetInUse(Exception):
    """Deleting the dataset is refused because runs use it."""

    def __init__(self, runs, *, dataset: Dataset | None = None):
        self.runs = list(runs)
        count = len(self.runs)
        whose = f" ({_whose(self.runs, dataset)})" if dataset is not None else ""
        runs_use = f"{count} run uses" if count == 1 else f"{count} runs use"
        super().__init__(f"{runs_use} this dataset{whose}; they must be deleted first")


def _whose(runs, dataset: Dataset) -> str:
    """'2 of bob, 1 of alice': owners named when they may be known to whoever may delete the
    dataset (its owner, its project's members); anyone else is "another user" (a staff member's run)."""
    known = {dataset.owner_id}
    if dataset.project_id:
        known |= set(dataset.project.memberships.values_list("user_id", flat=True))
    counts = Counter(run.owner.username if run.owner_id in known else "another user" for run in runs)
    return ", ".join(f"{n} of {who}" for who, n in counts.most_common())


def dataset_create(*, owner, name: str, kind: str, source: dict, options: dict, queue: bool = True) -> Dataset:
    """Create the row and queue its build once the transaction commits."""
    unknown = set(options) - set(OPTION_FIELDS)
    if unknown:
        raise ValueError(f"unknown dataset options: {', '.join(sorted(unknown))}")
    dataset = Dataset.objects.create(owner=owner, name=name, kind=kind, source=source, **options)
    audit.record(action="dataset.create", actor=owner, target=dataset, after={"kind": kind, **options})
    if queue:
        dataset_queue(dataset=dataset)
    return dataset


def dataset_queue(*, dataset: Dataset) -> None:
    """Queue the build once the transaction commits (the worker must see the committed row).

    Imports run one way, services -> tasks -> building: the task calls datasets.building, never
    this module, so the task object is imported at the top instead of inside this function.
    """
    pk = dataset.pk
    transaction.on_commit(lambda: build_dataset.delay(pk))


def dataset_cancel(*, dataset: Dataset) -> bool:
    """Cancel a pending or building dataset. The build loop sees the status and stops."""
    changed = Dataset.objects.filter(pk=dataset.pk, status__in=Dataset.ACTIVE_STATUSES).update(
        status=Dataset.Status.CANCELLED, finished_at=timezone.now(), error="Cancelled by the user."
    )
    if changed:
        before = {"status": dataset.status}
        dataset.refresh_from_db()
        publish(dataset)
        audit.record(action="dataset.cancel", target=dataset, before=before, after={"status": dataset.status})
    return bool(changed)


def dataset_rebuild(*, dataset: Dataset) -> bool:
    """Queue a failed or cancelled dataset again (e.g. after a worker crash left it cancelled)."""
    changed = Dataset.objects.filter(
        pk=dataset.pk, status__in=(Dataset.Status.FAILED, Dataset.Status.CANCELLED)
    ).update(
        status=Dataset.Status.PENDING,
        error="",
        progress_done=0,
        progress_total=0,
        images_per_second=0.0,
        started_at=None,
        finished_at=None,
        build_attempts=0,
    )
    if changed:
        before = {"status": dataset.status}
        dataset.refresh_from_db()
        dataset_queue(dataset=dataset)
        publish(dataset)
        audit.record(action="dataset.rebuild", target=dataset, before=before, after={"status": dataset.status})
    return bool(changed)


# A build whose worker died is queued again this many times in all, then failed.
BUILD_MAX_ATTEMPTS = 3


def reclaim_lost_builds() -> int:
    """Builds whose worker stopped sending heartbeats, or restarted, are queued again (or failed
    after BUILD_MAX_ATTEMPTS tries). Their partial files go: a build starts from nothing."""
    hosts = {host.hostname: host for host in WorkerHost.objects.all()}
    reclaimed = 0
    for dataset in Dataset.objects.filter(status=Dataset.Status.BUILDING, build_boot_id__isnull=False):
        # A build whose row moved lately (its progress) is alive even when its worker's beat is
        # late: a worker whose cores are all busy can starve its heartbeat (runs keep theirs so too).
        why = lost_worker(hosts.get(dataset.build_worker), dataset.build_boot_id, watched_at=dataset.updated_at)
        if not why:
            continue
        row = this_build(dataset.pk, dataset.build_attempts)
        # The partial files go inside the transaction that wins the row, before the queue's
        # on-commit send: a new try that starts at once must not lose its own temp folder.
        with transaction.atomic():
            if dataset.build_attempts >= BUILD_MAX_ATTEMPTS:
                error = (
                    f"{Dataset.RETRYABLE_ERRORS[1]} {dataset.build_attempts} times; "
                    f"the last time {why}. Rebuild to try again."
                )
                changed = row.update(status=Dataset.Status.FAILED, error=error, finished_at=timezone.now())
            else:
                error = f"Interrupted ({why}); building again from the start (try {dataset.build_attempts + 1})."
                changed = row.update(status=Dataset.Status.PENDING, error=error, progress_done=0)
                if changed:
                    dataset_queue(dataset=dataset)
            if changed:
                remove_partial_build(dataset.pk)
        if changed:
            reclaimed += 1
            log.warning("dataset %s: %s", dataset.pk, error)
            dataset.refresh_from_db()
            publish(dataset)
    return reclaimed


def dataset_delete(*, dataset: Dataset) -> None:
    """Delete the row and its files; refused (DatasetInUse) while runs use the dataset."""
    runs = list(dataset.runs.select_related("owner").order_by("-created_at"))
    if runs:
        raise DatasetInUse(runs, dataset=dataset)
    dataset_cancel(dataset=dataset)
    folder = dataset.path
    upload = (dataset.source or {}).get("upload")
    before = {"name": dataset.name, "owner": dataset.owner.username, "images": dataset.image_count}
    try:
        audit.record(action="dataset.delete", target=dataset, before=before)
        dataset.delete()
    except ProtectedError as exc:  # a run was created meanwhile
        raise DatasetInUse(exc.protected_objects, dataset=dataset) from None
    shutil.rmtree(folder, ignore_errors=True)
    if upload:
        upload_delete(user_id=dataset.owner_id, token=upload)


def dataset_skipped(*, dataset: Dataset, limit: int | None = None) -> list[dict]:
    path = dataset.path / "skipped.json"
    if not path.is_file():
        return []
    items = json.loads(path.read_text(encoding="utf-8"))
    return items[:limit] if limit is not None else items


# ------------------------------------------------------------------ the data doctor (datasets/doctor)


def _require_ready(dataset: Dataset) -> None:
    if dataset.status != Dataset.Status.READY:
        raise RequestError(None, f"dataset {dataset.pk} is {dataset.status}, not ready")


def duplicates_check(*, dataset: Dataset, by) -> bool:
    """Asks a worker for the dataset's duplicates report (again); False while one is being made."""
    _require_ready(dataset)
    if doctor_report.checking(dataset.path):
        return False
    doctor_report.mark_checking(dataset.path)
    audit.record(action="dataset.check_duplicates", actor=by, target=dataset)
    pk = dataset.pk
    transaction.on_commit(lambda: check_duplicates.delay(pk))
    return True


def duplicates_check_now(*, dataset: Dataset, by) -> dict:
    """The same check in this process (the command line's): its report."""
    _require_ready(dataset)
    audit.record(action="dataset.check_duplicates", actor=by, target=dataset)
    return duplicates_run(dataset_id=dataset.pk) or {}


# ------------------------------------------------------------------ dataset versions (datasets/versions.py)


class VersionInUse(Exception):
    """Deleting a version is refused because runs trained on it."""


def _latest_version(dataset: Dataset) -> DatasetVersion:
    if versions.first_version(dataset) is None:
        raise RequestError(None, f"dataset {dataset.pk}'s build cannot be read: build it again")
    return dataset.versions.order_by("-number").first()


def version_create(
    *, dataset: Dataset, by, fixes, base: DatasetVersion | None = None, note: str = ""
) -> DatasetVersion:
    """A new version: `base` (by default the latest) with `fixes` (datasets.validators.clean_fixes);
    its folder is written whole before its row exists. RequestError names a fix that cannot be
    made, and a version that would hold what an existing one holds."""
    _require_ready(dataset)
    cleaned = clean_fixes(fixes, task=dataset.task, labels=dataset.labels or [])
    with transaction.atomic():
        # Numbers are taken one at a time per dataset (a lock on its row; SQLite's writer lock).
        Dataset.objects.select_for_update().filter(pk=dataset.pk).first()
        latest = _latest_version(dataset)
        base = base or latest
        records = versions.records_of(dataset)
        contents = versions.apply_fixes(
            versions.contents_of(base, records), cleaned, records=records, number=base.number
        )
        digest = versions.digest_of(contents, records)
        same = dataset.versions.filter(digest=digest).first()
        if same is not None:
            raise RequestError("fixes", f"version {same.number} already holds exactly these images and labels")
        splits = versions.split_counts(contents, records, classes=len(dataset.labels or []), task=dataset.task)
        if "train" not in splits:
            raise RequestError("fixes", "the version would have no training images")
        number = latest.number + 1
        versions.write_folder(dataset, number, contents, splits)
        version = DatasetVersion.objects.create(
            dataset=dataset, number=number, digest=digest, parent=base, fixes=cleaned, splits=splits,
            note=note[:300], created_by=by,
        )  # fmt: skip
        after = {"version": number, "from": base.number, "digest": digest, "fixes": len(cleaned)}
        audit.record(action="dataset.version", actor=by, target=dataset, after=after)
    return version


def version_drop_leaks(*, dataset: Dataset, by) -> DatasetVersion:
    """A new version without the training split's copies of validation and test images, as the
    duplicates report lists them (datasets/doctor), from the latest version."""
    _require_ready(dataset)
    found = doctor_report.read(dataset.path)
    if not found or "error" in found:
        raise RequestError(None, "check the dataset for duplicates first: its report lists the leaks")
    latest = _latest_version(dataset)
    where = versions.contents_of(latest).where()
    drops = {}
    for pair in found.get("pairs", []):
        a, b = (pair["a"]["split"], pair["a"]["index"]), (pair["b"]["split"], pair["b"]["index"])
        for copy, original in ((a, b), (b, a)):
            if where.get(copy) == "train" and where.get(original) in ("val", "test"):
                drops[copy] = {"op": "drop", "split": copy[0], "index": copy[1]}
    if not drops:
        raise RequestError(
            None, f"version {latest.number}'s training split holds no copy of a validation or test image"
        )
    listed = sum(1 for pair in found.get("pairs", []) if pair["a"]["split"] != pair["b"]["split"])
    more = (
        f" (the report lists {listed:,} of its {found.get('leaks', 0):,} leaks)"
        if found.get("leaks", 0) > listed
        else ""
    )
    note = f"dropped {len(drops)} training copies of validation and test images{more}"
    return version_create(dataset=dataset, by=by, fixes=list(drops.values()), base=latest, note=note)


def version_delete(*, dataset: Dataset, version: DatasetVersion, by) -> None:
    """Deletes a version and its folder; refused for the build itself and while runs use it."""
    if version.number == 1:
        raise RequestError(None, "version 1 is the build itself: delete the dataset instead")
    runs = list(version.runs.select_related("owner"))
    if runs:
        count = len(runs)
        runs_use = f"{count} run trained" if count == 1 else f"{count} runs trained"
        raise VersionInUse(
            f"{runs_use} on version {version.number} ({_whose(runs, dataset)}); they must be deleted first"
        )
    before = {"version": version.number, "digest": version.digest}
    try:
        with transaction.atomic():
            version.delete()
            audit.record(action="dataset.version_delete", actor=by, target=dataset, before=before)
    except ProtectedError as exc:  # a run was created meanwhile
        raise VersionInUse(f"a run uses version {version.number}; it must be deleted first") from exc
    versions.remove_folder(version)
