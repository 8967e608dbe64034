"""Building one dataset: claim the row, plan the images, write the LMDBs, publish the folder.

Imports run one way: datasets.services queues a build through datasets.tasks, and the task calls
`dataset_build` here, so nothing in this module imports services (services -> tasks -> building).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from datasets.archives import ArchiveError, Caps, extract_archive
from datasets.build import BuildCancelled, BuildError, BuildResult, ImageOptions, build_lmdbs, default_workers
from datasets.events import publish
from datasets.image_limits import configured_image_limits
from datasets.label_runner import annotated_plan_bounded
from datasets.labels import LabelError
from datasets.labels.files import resolved_within
from datasets.labels.registry import reads_label_files
from datasets.lmdb_import import digits_sources, import_lmdbs
from datasets.models import Dataset
from datasets.names import os_error_text, readable, without_paths
from datasets.sources import Plan, SourceError, SplitOptions, plan_folder, plan_text_lists, unwrap_single_folder
from datasets.uploads import upload_delete
from datasets.versions import first_version, write_records

log = logging.getLogger(__name__)


def datasets_root() -> Path:
    root = Path(settings.DATA_DIR) / "datasets"
    root.mkdir(parents=True, exist_ok=True)
    return root


def remove_partial_build(pk: int) -> None:
    """The temp folders a dead build left (its final folder only ever appears whole)."""
    for partial in datasets_root().glob(f".{pk}.*-*"):
        shutil.rmtree(partial, ignore_errors=True)


def this_build(pk: int, attempt: int):
    """The row while this try builds it: not cancelled, deleted, or handed to another try."""
    return Dataset.objects.filter(pk=pk, status=Dataset.Status.BUILDING, build_attempts=attempt)


class _Progress:
    """Progress callback: the row's counters and the dashboard, at most about once a second."""

    def __init__(self, dataset: Dataset):
        self.dataset = dataset

    def __call__(self, done: int, total: int, rate: float) -> None:
        this_build(self.dataset.pk, self.dataset.build_attempts).update(
            progress_done=done, progress_total=total, images_per_second=rate
        )
        self.dataset.progress_done, self.dataset.progress_total = done, total
        self.dataset.images_per_second = rate
        publish(self.dataset)


def _stopped(pk: int, attempt: int) -> bool:
    return not this_build(pk, attempt).exists()


def _fail(pk: int, attempt: int, message: str) -> None:
    this_build(pk, attempt).update(status=Dataset.Status.FAILED, error=message[:4000], finished_at=timezone.now())


# --------------------------------------------------------------------------------------------
# The orchestration
# --------------------------------------------------------------------------------------------


def dataset_build(*, dataset_id: int, worker: str = "", boot_id: uuid.UUID | None = None) -> str:
    """Build a pending dataset; returns its final status. A duplicate delivery does nothing.

    Everything is written into a temp folder beside the final one and renamed into place at the
    end; a failed or cancelled build removes the temp folder, so no half-written LMDB remains.
    `worker` and `boot_id` name the Celery worker process building it (see reclaim_lost_builds).
    """
    dataset = _claim(dataset_id, worker=worker, boot_id=boot_id)
    if dataset is None:
        return "skipped"
    attempt = dataset.build_attempts
    publish(dataset)
    # A pending row owns no folder yet: anything at its path is stale (a reused primary key).
    shutil.rmtree(dataset.path, ignore_errors=True)
    root = datasets_root()
    nonce = uuid.uuid4().hex[:8]
    temp = root / f".{dataset.pk}.building-{nonce}"
    scratch = root / f".{dataset.pk}.extract-{nonce}"
    internal = _internal_folders(dataset, temp, scratch)
    try:
        _build_into(dataset, temp, scratch, internal)
    except BuildCancelled:
        log.info("dataset %s: build cancelled", dataset_id)
    except (BuildError, SourceError, ArchiveError, LabelError) as exc:
        log.info("dataset %s: build failed: %s", dataset_id, exc)
        _fail(dataset_id, attempt, _public(str(exc), internal))
    except Exception as exc:
        # The traceback goes to the log; the user reads the kind of error, never its raw text,
        # which can hold internal paths or another library's internals.
        log.exception("dataset %s: build crashed", dataset_id)
        what = type(exc).__name__ + (f": {os_error_text(exc)}" if isinstance(exc, OSError) else "")
        _fail(dataset_id, attempt, f"{Dataset.RETRYABLE_ERRORS[0]} ({what}); see the server log.")
    finally:
        shutil.rmtree(temp, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    dataset = Dataset.objects.filter(pk=dataset_id).first()
    if dataset is None:
        return "deleted"
    publish(dataset)
    return dataset.status


def _claim(dataset_id: int, *, worker: str, boot_id: uuid.UUID | None) -> Dataset | None:
    """Pending -> building in one conditional update: only one delivery of the task wins."""
    claimed = Dataset.objects.filter(pk=dataset_id, status=Dataset.Status.PENDING).update(
        status=Dataset.Status.BUILDING,
        started_at=timezone.now(),
        progress_done=0,
        progress_total=0,
        images_per_second=0.0,
        build_worker=worker,
        build_boot_id=boot_id,
        build_attempts=F("build_attempts") + 1,
    )
    return Dataset.objects.get(pk=dataset_id) if claimed else None


def _build_into(dataset: Dataset, temp: Path, scratch: Path, internal: dict[str, str]) -> None:
    """Build into `temp`, write the public report beside the LMDBs, then move it into place."""
    attempt = dataset.build_attempts

    def stopped() -> bool:
        return _stopped(dataset.pk, attempt)

    progress = _Progress(dataset)
    started = time.monotonic()
    if dataset.kind in (Dataset.Kind.LMDB, Dataset.Kind.DIGITS):
        result, source_root = _build_lmdb(dataset, temp, progress, stopped), None
    else:
        result, source_root = _build_images(dataset, temp, scratch, progress, stopped)
    # The one place a build's report is made public: no internal folder leaves it (the
    # messages are written not to hold one; this also covers text from libraries).
    skipped = [{**s, "path": _public(_relative(s["path"], source_root), internal)} for s in result.skipped]
    skipped = [{**s, "reason": _public(s["reason"], internal)} for s in skipped]
    (temp / "skipped.json").write_text(json.dumps(skipped, indent=1, ensure_ascii=False), encoding="utf-8")
    for split, paths in result.names.items():  # what a test names its images by (trainer.dataset_folder)
        names = [_public(_relative(path, source_root), internal) for path in paths]
        (temp / f"{split}_names.json").write_text(json.dumps(names, ensure_ascii=False), encoding="utf-8")
    for name, extra in result.extra_files.items():  # detection, segmentation: label report, statistics
        text = _public(json.dumps(extra, indent=1, ensure_ascii=False), internal)
        (temp / name).write_text(text, encoding="utf-8")
    _write_log(temp, dataset, result, skipped, time.monotonic() - started)
    _publish_folder(dataset, temp, result, skipped)


def _publish_folder(dataset: Dataset, temp: Path, result: BuildResult, skipped: list[dict]) -> None:
    """Rename the finished folder into place and mark the row ready, unless this try lost it."""
    write_records(temp)  # each record's digest: version 1's, and what later versions are told by
    size = _folder_size(temp)
    final = dataset.path
    if final.exists():
        shutil.rmtree(final)
    os.replace(temp, final)
    done = sum(s["count"] for s in result.splits.values()) + len(skipped)
    finished = this_build(dataset.pk, dataset.build_attempts).update(
        status=Dataset.Status.READY,
        error="",
        labels=result.labels,
        splits={k: {"count": v["count"], "class_counts": v["class_counts"]} for k, v in result.splits.items()},
        skipped_count=len(skipped),
        size_bytes=size,
        images_per_second=result.images_per_second,
        progress_done=done,
        progress_total=done,
        finished_at=timezone.now(),
    )
    if not finished:  # cancelled or deleted between the last check and now
        shutil.rmtree(final, ignore_errors=True)
        return
    dataset.refresh_from_db()
    first_version(dataset)
    if dataset.kind == Dataset.Kind.ARCHIVE and dataset.source.get("upload"):
        upload_delete(user_id=dataset.owner_id, token=dataset.source["upload"])


# --------------------------------------------------------------------------------------------
# Images: plan the splits from the source, then encode them
# --------------------------------------------------------------------------------------------


def _build_images(dataset: Dataset, out_dir: Path, scratch: Path, progress, should_stop) -> tuple[BuildResult, Path]:
    if reads_label_files(dataset.task):
        return _build_annotated(dataset, out_dir, scratch, progress, should_stop)
    options = _split_options(dataset)
    if dataset.kind == Dataset.Kind.ARCHIVE:
        plan, root = _archive_plan(dataset, scratch, options, should_stop)
    elif dataset.kind == Dataset.Kind.FOLDER:
        plan, root = _folder_plan(dataset, options)
    else:  # textlist
        plan, root = _text_list_plan(dataset, options)
    result = _build_plan(dataset, plan, out_dir, progress, should_stop)
    result.skipped = plan.skipped + result.skipped
    return result, root


def _build_plan(dataset: Dataset, plan, out_dir: Path, progress, should_stop) -> BuildResult:
    """The parallel build of a plan, for every task (images only, or images and their targets)."""
    progress(0, plan.total, 0.0)
    return build_lmdbs(
        plan.splits,
        plan.labels,
        out_dir,
        name=dataset.name,
        options=_image_options(dataset),
        workers=_workers_for(plan.total),
        limits=configured_image_limits(),
        progress=progress,
        should_stop=should_stop,
        task=dataset.task,
    )


def _build_annotated(dataset: Dataset, out_dir: Path, scratch: Path, progress, should_stop) -> tuple[BuildResult, Path]:
    """Detection and segmentation: read the labels (datasets.labels), apply the class table, split,
    then the same parallel build with each image's target beside it."""
    source = dataset.source
    extracted_skipped: list[dict] = []
    if dataset.kind == Dataset.Kind.ARCHIVE:
        extracted = _extract(dataset, scratch, should_stop)
        root, base = unwrap_single_folder(scratch), scratch
        extracted_skipped = extracted["skipped"]
    else:
        root = base = Path(source["path"])
        _check_roots(dataset, root)
    plan, report = annotated_plan_bounded(
        root=root,
        allowed_roots=None if dataset.kind == Dataset.Kind.ARCHIVE else _allowed_roots(dataset),
        task=dataset.task,
        fmt=source.get("format") or "auto",
        class_map=source.get("class_map"),
        min_box_size=float(source.get("min_box_size") or 0),
        val_percent=dataset.val_percent,
        test_percent=dataset.test_percent,
        seed=dataset.seed,
        shuffle=dataset.shuffle,
    )
    if source.get("format") != report["format"]:  # "auto": say which format was read
        dataset.source = {**source, "format": report["format"]}
        Dataset.objects.filter(pk=dataset.pk).update(source=dataset.source)
    result = _build_plan(dataset, plan, out_dir, progress, should_stop)
    # The report names files relative to the folder read; the skipped list relative to `base`.
    wrapper = root.relative_to(base)
    result.skipped = (
        extracted_skipped + [{**s, "path": str(wrapper / s["path"])} for s in plan.skipped] + result.skipped
    )
    result.extra_files = {"label_report.json": report, "label_stats.json": result.stats}
    return result, base


def archive_caps() -> Caps:
    """The settings' limits on what an archive may expand to (the build and the label check)."""
    return Caps(
        max_bytes=settings.ARCHIVE_MAX_BYTES,
        max_members=settings.ARCHIVE_MAX_MEMBERS,
        max_ratio=settings.ARCHIVE_MAX_RATIO,
        ratio_grace_bytes=settings.ARCHIVE_RATIO_GRACE_BYTES,
    )


def _extract(dataset: Dataset, scratch: Path, should_stop) -> dict:
    """Extract the dataset's archive into `scratch` within the caps; a cancel stops it."""
    source = dataset.source
    archive = Path(source["path"])
    if not source.get("upload"):
        _check_roots(dataset, archive)
    # Messages call it by the name the user knows: the uploaded file's, not the upload area's.
    display_name = source.get("filename") or archive.name
    caps = archive_caps()
    last_check = time.monotonic()

    def tick(members: int, nbytes: int) -> None:
        nonlocal last_check  # a cancel must also stop a long extraction
        if time.monotonic() - last_check >= 0.5:
            last_check = time.monotonic()
            if should_stop():
                raise BuildCancelled()

    return extract_archive(archive, scratch, caps, tick=tick, display_name=display_name)


def _archive_plan(dataset: Dataset, scratch: Path, options: SplitOptions, should_stop) -> tuple[Plan, Path]:
    """Extract the archive into `scratch` (within the caps) and plan its folder."""
    extracted = _extract(dataset, scratch, should_stop)
    display_name = dataset.source.get("filename") or Path(dataset.source["path"]).name
    # Resolved as plan_folder resolves its root, so the report's paths are relative to the same
    # folder as the plan's (a link above the data dir is the administrator's, not the archive's).
    scratch = scratch.resolve()
    root = unwrap_single_folder(scratch)
    plan = plan_folder(root, options, display_name=display_name)
    # Skipped paths are named as inside the archive, wrapper folder included.
    wrapper = root.relative_to(scratch)
    plan.skipped = extracted["skipped"] + [{**s, "path": str(wrapper / s["path"])} for s in plan.skipped]
    return plan, scratch


def _folder_plan(dataset: Dataset, options: SplitOptions) -> tuple[Plan, Path]:
    source = dataset.source
    root = Path(source["path"])
    val, test = _optional_path(source.get("val")), _optional_path(source.get("test"))
    _check_roots(dataset, root, val, test)
    plan = plan_folder(root, options, val_folder=val, test_folder=test, allowed_roots=_allowed_roots(dataset))
    return plan, root.resolve()  # as the plan's paths


def _text_list_plan(dataset: Dataset, options: SplitOptions) -> tuple[Plan, Path]:
    source = dataset.source
    train = Path(source["path"])
    labels = Path(source["labels"])
    image_folder = _optional_path(source.get("image_folder"))
    val, test = _optional_path(source.get("val")), _optional_path(source.get("test"))
    _check_roots(dataset, train, labels, image_folder, val, test)
    roots = _allowed_roots(dataset)
    plan = plan_text_lists(
        train, labels, options, image_folder=image_folder, val_list=val, test_list=test, allowed_roots=roots
    )
    return plan, (image_folder or train.parent).resolve()  # the base the plan's paths were joined to


def _split_options(dataset: Dataset) -> SplitOptions:
    return SplitOptions(
        val_percent=dataset.val_percent,
        test_percent=dataset.test_percent,
        min_per_class=dataset.min_per_class,
        max_per_class=dataset.max_per_class,
        seed=dataset.seed,
        shuffle=dataset.shuffle,
    )


def _image_options(dataset: Dataset) -> ImageOptions:
    return ImageOptions(
        width=dataset.image_width,
        height=dataset.image_height,
        channels=dataset.channels,
        resize_mode=dataset.resize_mode,
        encoding=dataset.encoding,
    )


def _workers_for(total: int) -> int:
    """Worker processes for `total` images: none for a small build (starting them costs more)."""
    if total <= settings.DATASET_INLINE_MAX_IMAGES:
        return 0
    return settings.DATASET_BUILD_WORKERS or default_workers()


# --------------------------------------------------------------------------------------------
# LMDBs: validate and copy existing Datum databases
# --------------------------------------------------------------------------------------------


def _build_lmdb(dataset: Dataset, out_dir: Path, progress, should_stop) -> BuildResult:
    source = dataset.source
    if dataset.kind == Dataset.Kind.DIGITS:
        folder = Path(source["path"])
        _check_roots(dataset, folder)
        sources, labels_file = digits_sources(folder)
    else:
        sources = {"train": Path(source["path"])}
        for split in ("val", "test"):
            if source.get(split):
                sources[split] = Path(source[split])
        labels_file = _optional_path(source.get("labels"))
        _check_roots(dataset, *sources.values(), labels_file)
    result, image_options = import_lmdbs(
        sources,
        out_dir,
        name=dataset.name,
        labels_file=labels_file,
        limits=configured_image_limits(),
        progress=progress,
        should_stop=should_stop,
    )
    Dataset.objects.filter(pk=dataset.pk).update(
        image_width=image_options.width,
        image_height=image_options.height,
        channels=image_options.channels,
        encoding=image_options.encoding,
    )
    return result


# --------------------------------------------------------------------------------------------
# Paths: where a build may read, and what its messages may show
# --------------------------------------------------------------------------------------------


def _optional_path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _allowed_roots(dataset: Dataset) -> list[Path] | None:
    """The import roots a dataset's source must stay in; None for the CLI's unrestricted import."""
    return settings.IMPORT_ROOTS if dataset.source.get("restrict_to_roots", True) else None


def _check_roots(dataset: Dataset, *paths: Path | None) -> None:
    """Re-check the allow-list at build time: the folder tree may have changed since the form. What
    reads a folder resolves and checks it again itself (resolved_within), so no swap in between counts."""
    roots = _allowed_roots(dataset)
    for path in paths:
        if path is not None and roots is not None:
            resolved_within(path, roots, SourceError)


def _relative(path: str, root: Path | None) -> str:
    if root is None:
        return path
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


def _folder_size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def _internal_folders(dataset: Dataset, *folders: Path) -> dict[str, str]:
    """Folders of the data dir that a build's messages must not show, and what shows instead:
    the build's temp folders vanish (paths become relative to the archive), an upload is called
    by its file name, the datasets and uploads areas by "<data dir>/..."."""
    names = {str(folder): "" for folder in folders}
    if dataset.source.get("upload") and dataset.source.get("path"):
        names[dataset.source["path"]] = dataset.source.get("filename") or "the upload"
    for area in (datasets_root(), Path(settings.DATA_DIR) / "uploads"):
        names[str(area)] = names[str(area.resolve())] = f"<data dir>/{area.name}"
    return names


def _public(text: str, internal: dict[str, str]) -> str:
    return readable(without_paths(text, internal))  # readable: JSON and the database take only UTF-8


def _write_log(folder: Path, dataset: Dataset, result: BuildResult, skipped: list[dict], seconds: float) -> None:
    lines = [
        f"dataset {dataset.pk} {dataset.name!r} built {timezone.now().isoformat()}",
        f"kind {dataset.kind}, source {json.dumps(dataset.source, ensure_ascii=False)}",
        f"{seconds:.1f} s, {result.images_per_second:.1f} images/s",
        f"classes {len(result.labels)}: {', '.join(result.labels)}",
    ]
    for split, info in result.splits.items():
        lines.append(f"{split}: {info['count']} images, per class {info['class_counts']}")
    lines.append(f"skipped {len(skipped)}")
    lines += [f"  {s['path']}: {s['reason']}" for s in skipped[:1000]]
    (folder / "build.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
