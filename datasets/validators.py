"""Validators for dataset input, shared by the forms, the API and the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError

from datasets.archives import ArchiveError
from datasets.images import RESIZE_MODES
from datasets.label_runner import CheckTookTooLong, label_preview_bounded
from datasets.labels import detect_format_in_names, detect_source_format
from datasets.labels.classes import class_map_shape_errors
from datasets.labels.common import LabelError
from datasets.labels.detect import NAMES_CANNOT_TELL
from datasets.labels.files import within_roots
from datasets.labels.registry import FORMAT_TASK, LABEL_TASKS, reads_label_files
from datasets.preview import archive_member_names, source_classes
from datasets.sources import SourceError
from datasets.versions import first_version
from trainer.messages import shown
from trainer.protocol import CLASSIFICATION, TASK_TRAITS, TASKS
from workbench.core.errors import RequestError
from workbench.core.numbers import NumberError, bounded_number

# Images per class, as the build's options store them (a 32-bit column: a larger number was a 500
# from the database, after the form let it through).
MAX_PER_CLASS = 2**31 - 1
SIZE_RE = re.compile(r"^\s*(\d+)\s*[xX×]\s*(\d+)\s*$")


def upload_request(data: dict) -> tuple[str, int] | dict[str, list[str]]:
    """A chunked upload's {"filename", "size"} -> (filename, size), or the errors by field. JSON
    true is no size (int(True) is 1), {} no file name (str({}) was taken as "{}")."""
    size, filename = data.get("size"), data.get("filename")
    if isinstance(size, str) and size.strip().isdecimal() and len(size.strip()) <= 18:
        size = int(size)
    errors: dict[str, list[str]] = {}
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        errors["size"] = ["Give the archive's size in bytes."]
    if filename in (None, ""):
        filename = "upload"
    if not isinstance(filename, str) or len(filename) > 255:
        errors["filename"] = ["Give the archive's file name (text, at most 255 characters)."]
    return errors or (filename, size)


def allowed_roots_text() -> str:
    roots = settings.IMPORT_ROOTS
    return ", ".join(str(r) for r in roots) if roots else "none (the administrator has not set WORKBENCH_IMPORT_ROOTS)"


def validate_import_path(raw: str, *, restrict_to_roots: bool = True) -> Path:
    """An existing absolute server path, inside an allowed import root when restricted.

    Symbolic links are resolved before the check, so a link cannot lead out of a root.
    """
    raw = (raw or "").strip()
    if not raw:
        raise ValidationError("Enter a path on the server.")
    path = Path(raw).expanduser()
    if not path.is_absolute():
        raise ValidationError(f"{raw}: give an absolute path (starting with /).")
    resolved = path.resolve()
    if restrict_to_roots:
        roots = settings.IMPORT_ROOTS
        if not within_roots(resolved, roots):
            raise ValidationError(f"{raw} is not inside an allowed import folder. Allowed: {allowed_roots_text()}.")
    if not resolved.exists():
        raise ValidationError(f"{raw}: no such file or folder on the server.")
    return resolved


def parse_image_size(raw: str) -> tuple[int, int]:
    """'WxH' -> (width, height), each 1..MAX_IMAGE_SIDE."""
    match = SIZE_RE.match(raw or "")
    if not match:
        raise ValidationError(f"{raw!r}: give the image size as WIDTHxHEIGHT, e.g. 256x256.")
    width, height = int(match.group(1)), int(match.group(2))
    validate_image_side(width)
    validate_image_side(height)
    return width, height


def validate_image_side(value: int) -> None:
    if not 1 <= value <= settings.MAX_IMAGE_SIDE:
        raise ValidationError(f"Image sides must be between 1 and {settings.MAX_IMAGE_SIDE} pixels, not {value}.")


def validate_source_classes(*, kind: str, path: Path, min_per_class: int) -> dict[str, int] | None:
    """{class: files} of an archive or a folder of class folders; refused at the request when
    fewer than two classes hold `min_per_class` images (an empty or one-class source), so the
    wizard, POST /api/datasets/ and import_dataset refuse alike instead of queueing a build that
    fails. None where the classes are not known before the build (labels files, LMDBs, a tar too
    long to list within the preview's time)."""
    try:
        return source_classes(kind=kind, path=path, min_per_class=min_per_class)
    except (SourceError, ArchiveError) as error:
        raise ValidationError(str(error)) from None


def validate_percent_pair(val_percent: int, test_percent: int) -> None:
    if val_percent + test_percent >= 100:
        raise ValidationError(
            f"Validation ({val_percent}%) and test ({test_percent}%) together must leave images for training."
        )


# --------------------------------------------------------------------------- detection, segmentation

# Resize modes that move boxes and masks with their image (crop would cut objects unseen).
ANNOTATED_RESIZE_MODES = ("squash", "fill")
ANNOTATED_KINDS = ("folder", "archive")
MAX_MIN_BOX_SIZE = 10_000


def resize_modes_for(task: str) -> tuple[str, ...]:
    """The resize modes a task takes, in the order the wizard offers them: every mode for a
    classifier, squash and fill where boxes and masks move with their image. The one home of this
    rule: the form, the API and the CLI refuse by it, the wizard offers by it (resize_modes_by_task)."""
    return ANNOTATED_RESIZE_MODES if reads_label_files(task) else RESIZE_MODES


def resize_modes_by_task() -> dict[str, list[str]]:
    """{task: its resize modes}, for the wizard's page (json_script): it offers what the task takes
    instead of keeping a copy of the rule that the form would then refuse in silence."""
    return {task: list(resize_modes_for(task)) for task in TASKS}


def propose_task(*, kind: str, path: Path) -> tuple[str, str]:
    """(task, format) a source holds when none was given: the format detected in a folder
    (datasets.labels.detect_format) or in an archive's member names, else classification."""
    fmt = None
    if kind == "folder" and path.is_dir():
        try:
            fmt = detect_source_format(path)
        except LabelError as error:  # a link where a format looks: named, not followed
            raise ValidationError(str(error)) from None
    elif kind == "archive":
        try:
            names = archive_member_names(path)
        except ArchiveError as error:
            raise ValidationError(str(error)) from None
        fmt = detect_format_in_names(names) if names else None
        if fmt in NAMES_CANNOT_TELL:  # colour or index masks: the build looks inside them
            return FORMAT_TASK[fmt], "auto"
    if fmt is not None:
        return FORMAT_TASK[fmt], fmt
    return CLASSIFICATION, "auto"


def validate_task_fields(*, task: str, fmt: str, kind: str, resize_mode: str) -> dict[str, str]:
    """What is wrong, by field, with a task's format, kind and resize mode (one rule for the
    wizard, the API and the CLI)."""
    errors = {}
    if not reads_label_files(task):
        if fmt != "auto":
            tasks = " and ".join(sorted(LABEL_TASKS))
            errors["format"] = f"format {fmt} is for {tasks}; a {task} source is class folders"
        return errors
    if fmt != "auto" and FORMAT_TASK.get(fmt) != task:
        errors["format"] = f"{fmt} holds {FORMAT_TASK.get(fmt, 'unknown')} labels, not {task}"
    if kind not in ANNOTATED_KINDS:
        errors["task"] = f"{task} reads a folder or an archive of images and labels, not a {kind} source"
    if resize_mode not in resize_modes_for(task):
        taken = " or ".join(resize_modes_for(task))
        errors["resize_mode"] = (
            f"{resize_mode} would cut objects out of the image; {task} takes {taken}, "
            "which move boxes and masks with their image"
        )
    return errors


def parse_class_map(raw) -> dict | None:
    """The class table as given (an object, or its JSON text) -> {source class: new name or None}."""
    if raw in (None, "", {}):
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"the class table is not valid JSON ({exc.msg} at character {exc.pos})") from None
    errors = class_map_shape_errors(raw)
    if errors:
        raise ValidationError(errors)
    return raw or None


def validate_min_box_size(value) -> float:
    """The minimum box size as given (a number or its text; empty: 0) -> pixels, through the one
    bounded parser (a 400-digit integer or Infinity is refused with the field named, not a 500)."""
    if value in (None, ""):
        return 0.0
    try:
        return float(bounded_number(value, field="min_box_size", low=0, high=MAX_MIN_BOX_SIZE))
    except NumberError as error:
        raise ValidationError(f"{error} (pixels)") from None


def validate_label_source(
    *,
    task: str,
    fmt: str,
    path: Path,
    class_map: dict | None,
    min_box_size: float,
    allowed_roots: list[Path] | None,
) -> dict | CheckTookTooLong:
    """The label check of a folder (datasets.labels.plan.label_check, in the bounded child of
    datasets.label_runner, which holds the folder to `allowed_roots` where it reads it); refused when
    it cannot be read as the format, holds no usable image, or the class table names a class it
    lacks. A check that ran out of its (interactive) time is no refusal: it is given back, to be
    said, and the build reads every file under its own limits."""
    try:
        check = label_preview_bounded(
            kind="folder",
            path=path,
            task=task,
            fmt=fmt,
            class_map=class_map,
            min_box_size=min_box_size,
            caps=None,
            scratch=None,
            allowed_roots=allowed_roots,
        )
    except CheckTookTooLong as unfinished:
        return unfinished
    except LabelError as error:
        raise ValidationError(str(error)) from None
    if not check["images"]:
        counts = ", ".join(f"{n} {kind}" for kind, n in check["report"]["counts"].items())
        raise ValidationError(f"no usable annotated image in the source ({counts or 'no images'})")
    return check


FIX_OPS = ("drop", "relabel", "move")
MAX_FIXES = 100_000
FIX_SPLITS = ("train", "val", "test")


def _fix_index(value, where: str):
    if type(value) is not int or value < 0:
        raise RequestError(where, f"{shown(value)} is not an image's index (a whole number, 0 or more)")
    return value


def clean_fixes(raw, *, task: str, labels: list[str]) -> list[dict]:
    """Fixes for a new dataset version, as the API, the pages and the command send them: a list
    of {"op": "drop" | "relabel" | "move", "split", "index"} naming an image by its place in the
    build (what the duplicates report and the suspects list name), with "label" (a class index or
    name; classification only) to relabel and "to" (a split) to move. RequestError names the fix."""
    if not isinstance(raw, list) or not raw:
        raise RequestError("fixes", "give a list of fixes, each {op, split, index[, label | to]}")
    if len(raw) > MAX_FIXES:
        raise RequestError("fixes", f"{len(raw):,} fixes; at most {MAX_FIXES:,} make one version")
    cleaned = []
    for number, fix in enumerate(raw):
        where = f"fixes.{number}"
        if not isinstance(fix, dict):
            raise RequestError(where, "each fix is an object {op, split, index[, label | to]}")
        op = fix.get("op")
        if op not in FIX_OPS:
            raise RequestError(f"{where}.op", f"{shown(op)} is not one of {', '.join(FIX_OPS)}")
        split = fix.get("split")
        if split not in FIX_SPLITS:
            raise RequestError(f"{where}.split", f"{shown(split)} is not one of {', '.join(FIX_SPLITS)}")
        item = {"op": op, "split": split, "index": _fix_index(fix.get("index"), f"{where}.index")}
        if op == "relabel":
            if TASK_TRAITS[task].targets_db:  # boxes or a mask, not one label in the image's record
                raise RequestError(f"{where}.op", f"a {task} dataset's images have no one label to change")
            item["label"] = _fix_label(fix.get("label"), labels, f"{where}.label")
        if op == "move":
            to = fix.get("to")
            if to not in FIX_SPLITS or to == split:
                others = ", ".join(s for s in FIX_SPLITS if s != split)
                raise RequestError(f"{where}.to", f"{shown(to)} is not another split ({others})")
            item["to"] = to
        unknown = set(fix) - {"op", "split", "index", "label", "to"}
        if unknown:
            raise RequestError(where, f"unknown keys: {', '.join(sorted(map(str, unknown)))}")
        cleaned.append(item)
    return cleaned


def _fix_label(value, labels: list[str], where: str) -> int:
    if isinstance(value, str) and value in labels:
        return labels.index(value)
    if type(value) is int and 0 <= value < len(labels):
        return value
    raise RequestError(where, f"{shown(value)} is not one of the dataset's {len(labels)} classes (an index or a name)")


def version_to_train_on(dataset, number):
    """The dataset's version `number` (a run's `dataset_version`); RequestError names the ones it has."""
    if type(number) is not int or number < 1:
        raise RequestError("dataset_version", f"{shown(number)} is not a version number (1, 2, ...)")
    if number == 1 and dataset.status == dataset.Status.READY:
        first_version(dataset)  # a dataset built before versions existed
    version = dataset.versions.filter(number=number).first()
    if version is None:
        numbers = list(dataset.versions.values_list("number", flat=True))
        has = f"its versions: {', '.join(map(str, numbers))}" if numbers else "it is not built yet"
        raise RequestError("dataset_version", f"dataset {dataset.name!r} has no version {number} ({has})")
    return version
