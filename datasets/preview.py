"""The wizard's resize preview: one of the user's images, before and after the chosen mode."""

from __future__ import annotations

import base64
import os
import tarfile
import zipfile
from pathlib import Path

import numpy as np

from datasets.archives import ArchiveError, archive_kind, open_zip, safe_member_path
from datasets.images import ImageRefused, load_image, prepare_image, resize_image, to_array, to_png_bytes
from datasets.names import is_utf8, os_error_text
from datasets.sources import SourceError, read_labels_file
from trainer.datum import DatumError, DatumLMDB, decode_datum

MAX_TRIES = 20
MAX_MEMBER_BYTES = 64 * 1024 * 1024


def _data_url(array: np.ndarray) -> str:
    return "data:image/png;base64," + base64.b64encode(to_png_bytes(array)).decode("ascii")


def _folder_candidates(root: Path):
    # The same names as a build leaves out (datasets.sources): hidden, and not UTF-8.
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__MACOSX" and is_utf8(d))
        for name in sorted(filenames):
            if not name.startswith(".") and is_utf8(name):
                path = Path(dirpath) / name
                if path.is_file() and not path.is_symlink():
                    yield str(path.relative_to(root)), path


def _textlist_candidates(list_path: Path, image_folder: Path | None, roots: list[Path] | None):
    base = image_folder or list_path.parent
    with open(list_path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.strip().rsplit(None, 1)
            if len(parts) == 2:
                path = Path(parts[0]) if Path(parts[0]).is_absolute() else base / parts[0]
                resolved = path.resolve()
                if roots is not None and not any(resolved.is_relative_to(r) for r in roots):
                    continue
                yield parts[0], path


def _archive_candidates(path: Path):
    kind = archive_kind(path)
    if kind == "zip":
        with open(path, "rb") as fh:
            archive, not_utf8 = open_zip(fh)  # members named in bytes that are not UTF-8 are left out
            yield from _zip_candidates(archive, not_utf8)
    elif kind == "tar":
        with tarfile.open(path, mode="r|*", encoding="utf-8", errors="surrogateescape") as archive:
            for member in archive:
                if not is_utf8(member.name):
                    continue
                safe_member_path(member.name)
                if not member.isreg() or member.size > MAX_MEMBER_BYTES:
                    continue
                fh = archive.extractfile(member)
                data = fh.read(MAX_MEMBER_BYTES + 1) if fh else b""
                if len(data) <= MAX_MEMBER_BYTES:
                    yield member.name, data
    else:
        raise ArchiveError(f"{path.name}: not a zip or tar archive")


def _zip_candidates(archive: zipfile.ZipFile, not_utf8: dict[int, bytes]):
    with archive:
        for info in archive.infolist():
            if info.header_offset in not_utf8:
                continue
            safe_member_path(info.filename)
            if info.is_dir() or info.file_size > MAX_MEMBER_BYTES:
                continue
            with archive.open(info) as member:
                data = member.read(MAX_MEMBER_BYTES + 1)
            if len(data) <= MAX_MEMBER_BYTES:
                yield info.filename, data


def _first_record(lmdb_path: Path) -> dict:
    db = DatumLMDB(lmdb_path)
    try:
        first = db.first()
        if first is None:
            raise SourceError(f"{lmdb_path}: the LMDB is empty")
        chw, label = decode_datum(first[1], key=first[0])
    except (DatumError, Exception) as exc:
        raise SourceError(f"{lmdb_path}: the first record cannot be read ({exc})") from None
    finally:
        db.close()
    hwc = np.ascontiguousarray(chw.transpose(1, 2, 0))
    return {
        "file": f"record {first[0].decode('ascii', 'replace')} (label {label})",
        "original": _data_url(hwc),
        "original_size": [hwc.shape[1], hwc.shape[0]],
        "resized": _data_url(hwc),
        "note": "LMDB images are imported at their stored size.",
    }


def resize_preview(
    *,
    kind: str,
    path: Path,
    width: int,
    height: int,
    channels: int,
    resize_mode: str,
    labels_path: Path | None = None,
    image_folder: Path | None = None,
    allowed_roots: list[Path] | None = None,
) -> dict:
    """{"file", "original", "original_size", "resized"} for the first image of the source."""
    if kind in ("lmdb", "digits"):
        return _first_record(path / "train_db" if kind == "digits" else path)
    if kind == "folder":
        candidates = _folder_candidates(path)
    elif kind == "textlist":
        if labels_path is not None:
            read_labels_file(labels_path)
        candidates = _textlist_candidates(path, image_folder, allowed_roots)
    else:
        candidates = _archive_candidates(path)
    try:
        return _first_image(candidates, width=width, height=height, channels=channels, resize_mode=resize_mode)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, RuntimeError, UnicodeDecodeError) as exc:
        # A damaged upload is the user's problem to hear about, not a server error.
        raise ArchiveError(f"{path.name}: damaged archive ({os_error_text(exc)})") from None


def _first_image(candidates, *, width: int, height: int, channels: int, resize_mode: str) -> dict:
    problems = []
    for tries, (name, source) in enumerate(candidates):
        if tries >= MAX_TRIES:
            break
        try:
            data = source if isinstance(source, bytes) else Path(source).read_bytes()
            image = load_image(data)
            original = to_array(image, channels)
            image.close()
            resized = resize_image(original, height, width, resize_mode, rng=np.random.default_rng(0))
        except (ImageRefused, OSError) as exc:
            problems.append(f"{name}: {os_error_text(exc)}")  # an OSError's own text holds the full path
            continue
        return {
            "file": name,
            "original": _data_url(original),
            "original_size": [original.shape[1], original.shape[0]],
            "resized": _data_url(resized),
        }
    detail = f" ({'; '.join(problems[:3])})" if problems else ""
    raise SourceError(f"no image found to preview in the first {MAX_TRIES} files{detail}")


__all__ = ["resize_preview", "prepare_image"]
