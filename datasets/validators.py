"""Validators for dataset input, shared by the forms, the API and the CLI."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError

from datasets.archives import ArchiveError
from datasets.preview import source_classes
from datasets.sources import SourceError

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
        if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
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
