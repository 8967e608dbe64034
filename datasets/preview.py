"""The wizard's preview: one of the user's images, before and after the chosen mode, and the
classes the source holds, so a source a build would refuse is refused on this step already."""

from __future__ import annotations

import base64
import io
import os
import tarfile
import tempfile
import time
import zipfile
from collections import Counter
from pathlib import Path, PurePosixPath

import numpy as np
from PIL import Image

from datasets.archives import ArchiveError, Caps, archive_kind, extract_archive, open_zip, safe_member_path
from datasets.images import (
    FORMATS,
    RESIZE_MODES,
    ImageRefused,
    load_image,
    prepare_image,
    resize_image,
    to_array,
    to_png_bytes,
)
from datasets.labels.plan import label_check
from datasets.labels.prepare import open_image
from datasets.names import class_name_problem, is_utf8, os_error_text
from datasets.sources import (
    IGNORED_FOLDERS,
    SourceError,
    read_labels_file,
    read_source_text,
    text_list_path,
    unwrap_single_folder,
)
from trainer.datum import DatumError, DatumLMDB, decode_datum

MAX_TRIES = 20
LABEL_SUFFIXES = (".xml", ".txt", ".json", ".yaml", ".yml")
# Images whose size and channels are read (headers only) to propose the options that fit them.
SAMPLE_IMAGES = 20
# Modes whose images are grey: the proposal keeps them as one channel.
GREY_MODES = {"1", "L", "LA", "La", "I", "I;16", "I;16B", "I;16L", "I;16N", "F"}
MAX_MEMBER_BYTES = 64 * 1024 * 1024
# Reading a tar's member list means reading the whole (compressed) stream: past this, the preview
# leaves the class count to the build.
CLASS_SCAN_SECONDS = 3.0


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
    base = (image_folder or list_path.parent).resolve()
    for line in read_source_text(list_path, "text list").splitlines():  # as the build reads it
        parts = line.strip().rsplit(None, 1)
        if len(parts) == 2 and (path := text_list_path(parts[0], base, roots)) is not None:
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
    # Label files beside the images (VOC's Annotations/ sorts before JPEGImages/) are no candidates.
    candidates = ((n, s) for n, s in candidates if PurePosixPath(n).suffix.lower() not in LABEL_SUFFIXES)
    problems = []
    result = None
    shapes: Counter = Counter()
    for tries, (name, source) in enumerate(candidates):
        if (result is None and tries >= MAX_TRIES) or sum(shapes.values()) >= SAMPLE_IMAGES:
            break
        data = source if isinstance(source, bytes) else None
        try:
            data = data if data is not None else _read_image(source)
            if result is not None:
                shapes[_shape(data)] += 1
                continue
            image = load_image(data)
            shapes[(image.width, image.height, 1 if image.mode in GREY_MODES else 3)] += 1
            original = to_array(image, channels)
            image.close()
            resized = resize_image(original, height, width, resize_mode, rng=np.random.default_rng(0))
        except (ImageRefused, OSError, ValueError, Image.DecompressionBombError) as exc:
            if result is None:
                problems.append(f"{name}: {os_error_text(exc)}")  # an OSError's own text holds the full path
            continue
        result = {
            "file": name,
            "original": _data_url(original),
            "original_size": [original.shape[1], original.shape[0]],
            "resized": _data_url(resized),
            # Every mode on the same image, side by side, so the choice is made by looking.
            "modes": {
                mode: _data_url(resize_image(original, height, width, mode, rng=np.random.default_rng(0)))
                for mode in RESIZE_MODES
            },
        }
    if result is None:
        detail = f" ({'; '.join(problems[:3])})" if problems else ""
        raise SourceError(f"no image found to preview in the first {MAX_TRIES} files{detail}")
    result["proposed"] = _proposal(shapes)
    return result


def _read_image(path: Path) -> bytes:
    """A server folder's image, opened as the build opens it (datasets.labels.prepare.open_image):
    a link anywhere on its way is refused, so the preview never shows what a link points at."""
    with open_image(str(path)) as handle:
        return handle.read()


def _shape(data: bytes) -> tuple[int, int, int]:
    """Width, height and channels from an image's header, without decoding it."""
    with Image.open(io.BytesIO(data), formats=FORMATS) as image:
        return image.width, image.height, 1 if image.mode in GREY_MODES else 3


def cap_proposal(proposed: dict, max_side: int) -> dict:
    """The proposal with no side over `max_side`, the largest a dataset may have (in place)."""
    proposed.update(width=min(proposed["width"], max_side), height=min(proposed["height"], max_side))
    return proposed


def _proposal(shapes: Counter) -> dict:
    """The options that keep the sampled images as they are: the size most of them have, grey
    when all of them are grey."""
    (width, height, _), count = shapes.most_common(1)[0]
    grey = all(c == 1 for _w, _h, c in shapes)
    sampled = sum(shapes.values())
    return {"width": width, "height": height, "channels": 1 if grey else 3, "sampled": sampled, "same_size": count}


def archive_member_names(path: Path) -> list[tuple[str, ...]] | None:
    """The parts of each file's name in an archive (None: a tar too long to list now); a damaged
    archive is an ArchiveError naming it."""
    try:
        return _archive_member_files(path)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise ArchiveError(f"{path.name}: damaged archive ({os_error_text(exc)})") from None


def _archive_member_files(path: Path) -> list[tuple[str, ...]] | None:
    """The parts of each file's name in the archive; None when a tar is too long to list now."""
    if archive_kind(path) == "zip":
        # As the build reads it: members whose names are not UTF-8 are skipped, so not counted.
        with path.open("rb") as fh:
            archive, not_utf8 = open_zip(fh)
            with archive:
                members = [i for i in archive.infolist() if not i.is_dir() and i.header_offset not in not_utf8]
                return [PurePosixPath(i.filename).parts for i in members]
    deadline = time.monotonic() + CLASS_SCAN_SECONDS
    names = []
    with tarfile.open(path, mode="r|*", encoding="utf-8", errors="surrogateescape") as archive:
        for member in archive:
            if time.monotonic() > deadline:
                return None
            if member.isreg():
                names.append(PurePosixPath(member.name).parts)
    return names


def _folder_member_files(root: Path, enough: int) -> list[tuple[str, ...]]:
    names = []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.is_dir(follow_symlinks=False):
            found = 0
            for _name, _path in _folder_candidates(Path(entry.path)):
                found += 1
                names.append((entry.name, _name))
                if found >= enough:
                    break  # enough to count the class as usable
    return names


def _class_counts(names: list[tuple[str, ...]], *, unwrap: bool) -> Counter:
    """Files per class folder, the way a build reads the source (sources.unwrap_single_folder)."""
    parts = [p for p in names if not any(x.startswith(".") or x in IGNORED_FOLDERS for x in p)]
    for _ in range(4 if unwrap else 0):
        if len({p[0] for p in parts}) == 1 and all(len(p) > 1 for p in parts) and any(len(p) > 2 for p in parts):
            parts = [p[1:] for p in parts]
        else:
            break
    # A class folder whose name the build skips (datasets.names' class-name rule) is no class here either.
    return Counter(p[0] for p in parts if len(p) > 1 and class_name_problem(p[0]) is None)


def source_classes(*, kind: str, path: Path, min_per_class: int) -> dict[str, int] | None:
    """{class: files} of an archive or a folder, refused (SourceError, in the build's words) when
    fewer than two classes hold `min_per_class` files; None for the kinds whose classes come from
    a labels file, and for a tar too long to list within the preview's time."""
    if kind == "archive":
        names = _archive_member_files(path)
        counts = None if names is None else _class_counts(names, unwrap=True)
    elif kind == "folder":
        counts = _class_counts(_folder_member_files(path, min_per_class), unwrap=False)
    else:
        return None
    if counts is None:
        return None
    usable = {name: n for name, n in sorted(counts.items()) if n >= min_per_class}
    if len(usable) < 2:
        found = ", ".join(repr(name) for name in usable) or "none"
        raise SourceError(f"{path.name}: a classifier needs at least 2 classes with images; usable classes: {found}")
    return usable


def label_preview(
    *,
    kind: str,
    path: Path,
    task: str,
    fmt: str,
    class_map: dict | None,
    min_box_size: float,
    caps: Caps,
    scratch: Path,
    display_name: str | None = None,
    allowed_roots: list[Path] | None = None,
) -> dict:
    """The label check (datasets.labels.plan.label_check) of a folder, held to `allowed_roots` when
    it is read, or of an archive extracted within `caps` into a temporary folder under `scratch`
    that is removed afterwards. Raises LabelError or ArchiveError naming the file."""
    if kind != "archive":
        return label_check(
            path, task=task, fmt=fmt, class_map=class_map, min_box_size=min_box_size, allowed_roots=allowed_roots
        )
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".label-check-", dir=scratch) as temp:
        extract_archive(path, Path(temp) / "archive", caps, display_name=display_name)
        root = unwrap_single_folder(Path(temp) / "archive")
        return label_check(root, task=task, fmt=fmt, class_map=class_map, min_box_size=min_box_size)


__all__ = ["label_preview", "resize_preview", "prepare_image", "source_classes"]
