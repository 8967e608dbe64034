"""The one way a label reader (and the build worker after it) opens or lists a file of a source.

Rule: nothing inside a source is reached through a symbolic link. A folder on the server under the
import roots is the user's to fill, and a link in it (classes.txt -> the secret key, images/ ->
another user's folder in the data dir) would make the reader hand out what it points at: a class
name, an image in a gallery. Class folders (datasets.sources) and archives (datasets.archives)
already refuse links; the label readers refuse them here, with the same words.

How: the source's root is resolved once (datasets.labels.read_labels), so a path the readers
make holds no link anywhere. Every file is then opened by walking its path from "/" one component
at a time with O_NOFOLLOW: a link met on the way is refused at the open itself, so a file swapped
for a link after it was listed is refused too (no gap between a check and the open). Listings walk
the same way, by folder descriptors, never into a linked folder.

A reader may not call open(), Path.open/read_text/read_bytes or Image.open on a path of the
source; tests/datasets/labels/test_files.py scans datasets/labels/ for them.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from datasets.labels.limits import limit_for, over_limit_text
from datasets.names import LINK_NOT_FOLLOWED, os_error_text

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO planted as "classes.txt" must not hang the reader; it is refused as
# not a regular file right after.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class LabelError(ValueError):
    """The source cannot be read at all as this format; the message names the file."""


class LinkRefused(LabelError):
    """A symbolic link inside the source; the message names it relative to the source."""


class NotRegularFile(LabelError):
    """A FIFO, device or socket where a file was expected."""


class TooLarge(LabelError):
    """A label file over its kind's byte limit (datasets.labels.limits); the message names both."""


def within_roots(path: Path, roots: list[Path]) -> bool:
    """Whether `path` (resolved, or normalised and then opened without following a link) is one of
    the import `roots` (resolved by settings) or lies under one: the one test of the allow-list."""
    return any(path == root or path.is_relative_to(root) for root in roots)


def resolved_within(path: Path, roots: list[Path] | None, refusal: type[ValueError]) -> Path:
    """`path` resolved, and checked against `roots` (None: unrestricted, the CLI) in the same step.

    Why here and not only in the form: a folder checked there (or by the build's re-check) and
    resolved again when read could have been swapped for a link in between, leading the reader
    into another user's folder. Resolved and checked once, the reader then opens everything from
    "/" without following a link, so a swap made after this is refused at the open."""
    resolved = path.resolve()
    if roots is not None and not within_roots(resolved, roots):
        raise refusal(f"{path} is not inside an allowed import folder")
    return resolved


# The longest file name (one part of a path) Linux's file systems take.
MAX_NAME_BYTES = 255


def relative_name(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return path.name


def joined(folder: Path, name: str, root: Path) -> Path | None:
    """`folder / name` for a file name a label file gives (VOC's <filename>, COCO's file_name),
    or None when it would leave the source: absolute ("/etc/passwd" joined to anything is itself),
    with "..", or a folder outside `root`; or when no file can have that name (a part longer than
    the file system's 255 bytes: asking the system of it raised "File name too long" out of the
    reader). Links on the way are refused when it is opened."""
    relative = Path(name)
    if not name or relative.is_absolute() or ".." in relative.parts:
        return None
    if any(len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES for part in relative.parts):
        return None
    path = folder / relative
    return path if path.is_relative_to(root) else None


def _shown(path: Path, root: Path | None) -> str:
    """How a message names `path`: relative to the source, or its base name alone without a root
    (a build worker's message must not hold a path inside the server)."""
    return relative_name(path, root) if root else path.name


def _refuse(parent_fd: int, name: str, path: Path, root: Path | None) -> None:
    """Raise LinkRefused when `name` in `parent_fd` is a link (the open failed because of it)."""
    try:
        is_link = stat.S_ISLNK(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode)
    except OSError:
        return
    if is_link:
        raise LinkRefused(f"{_shown(path, root)}: {LINK_NOT_FOLLOWED}")


def _open_parent(path: Path, root: Path | None) -> int:
    """A descriptor of `path`'s folder, reached from "/" without following a link."""
    fd = os.open("/", _DIRECTORY_FLAGS)
    walked = Path("/")
    try:
        for part in path.parts[1:-1]:
            walked = walked / part
            try:
                child = os.open(part, _DIRECTORY_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    _refuse(fd, part, walked, root)
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_fd(path: Path, root: Path | None, *, directory: bool) -> int:
    path = Path(os.path.abspath(path))  # lexical: no link is followed on the walk anyway
    parent = _open_parent(path, root)
    try:
        try:
            return os.open(path.name, _DIRECTORY_FLAGS if directory else _FILE_FLAGS, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                _refuse(parent, path.name, path, root)
            raise
    finally:
        os.close(parent)


def open_file(path: str | os.PathLike[str], root: Path | None = None) -> BinaryIO:
    """`path` (absolute, under a resolved root) opened for reading in binary; LinkRefused when a
    link lies anywhere on its way, NotRegularFile for a FIFO or device. `root` only names things."""
    path = Path(path)
    fd = _open_fd(path, root, directory=False)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(f"{_shown(path, root)}: not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def file_size(handle: BinaryIO) -> int:
    return os.fstat(handle.fileno()).st_size


# --------------------------------------------------------------------------- bounded reading


class _Limited(io.RawIOBase):
    """A source file read by a parser, refused (TooLarge) as soon as it gives more than its kind's
    limit: its size was checked at the open, and this holds when it grows while being read."""

    def __init__(self, handle: BinaryIO, name: str, kind: str) -> None:
        super().__init__()
        self.handle, self.name_shown, self.kind = handle, name, kind
        self.left = limit_for(kind).max_bytes
        self.seen = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = self.handle.readinto(memoryview(buffer)[: self.left + 1])
        self.seen += count
        self.left -= count
        if self.left < 0:
            raise TooLarge(over_limit_text(self.name_shown, max(self.seen, file_size(self.handle)), self.kind))
        return count

    def close(self) -> None:
        self.handle.close()
        super().close()


@contextmanager
def open_limited(path: Path, root: Path, kind: str) -> Iterator[io.RawIOBase]:
    """`path` opened through the one door for a parser that streams it, within `kind`'s byte limit
    (datasets.labels.limits): TooLarge at once when its size is over, else while it is read. Other
    failures to read are a LabelError naming the file relative to `root`."""
    name = relative_name(path, root)
    try:
        handle = open_file(path, root)
    except OSError as exc:
        raise LabelError(f"{name}: cannot be read ({os_error_text(exc)})") from None
    with _Limited(handle, name, kind) as limited:
        if file_size(handle) > limit_for(kind).max_bytes:
            raise TooLarge(over_limit_text(name, file_size(handle), kind))
        try:
            yield limited
        except OSError as exc:
            raise LabelError(f"{name}: cannot be read ({os_error_text(exc)})") from None


def read_limited(path: Path, root: Path, kind: str) -> bytes:
    """The whole of a file a parser needs at once (JSON, YAML, a class list), within its kind's limit."""
    with open_limited(path, root, kind) as limited:
        return limited.read()


def limited_lines(path: Path, root: Path, kind: str) -> Iterator[tuple[int, str]]:
    """(number from 1, line without its end) of a UTF-8 text file, one at a time, within its kind's
    limit: a file of one image's objects is never held whole. LabelError names the file, and the line
    when it is not UTF-8 there (lines before it were given already: the caller drops the file)."""
    number = 0
    with open_limited(path, root, kind) as limited:
        text = io.TextIOWrapper(io.BufferedReader(limited), encoding="utf-8-sig", newline=None)
        try:
            for number, line in enumerate(text, start=1):
                yield number, line.rstrip("\n")
        except UnicodeDecodeError:
            raise LabelError(f"{relative_name(path, root)} line {number + 1}: not UTF-8 text") from None
        finally:
            text.detach()


@contextmanager
def _folder(folder: Path, root: Path) -> Iterator[int]:
    fd = _open_fd(folder, root, directory=True)
    try:
        yield fd
    finally:
        os.close(fd)


def list_files(folder: Path, root: Path, on_link: Callable[[Path], None]) -> Iterator[Path]:
    """Regular files under `folder` (files of a folder before its sub-folders, each sorted by
    name), hidden names left out; each link met is left out and given to `on_link`. LinkRefused
    when `folder` itself (or a folder above it in the source) is a link; nothing when it is missing."""
    try:
        with _folder(folder, root) as fd:
            yield from _walk(fd, folder, on_link, depth=0)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        return


# Deeper than this is not a dataset's layout; it bounds the descriptors one walk holds open.
MAX_DEPTH = 32


def _walk(fd: int, folder: Path, on_link: Callable[[Path], None], depth: int) -> Iterator[Path]:
    with os.scandir(fd) as scan:
        entries = sorted((e for e in scan if not e.name.startswith(".")), key=lambda e: e.name)
    folders = []
    for entry in entries:
        path = folder / entry.name
        if entry.is_symlink():
            on_link(path)
        elif entry.is_dir(follow_symlinks=False):
            folders.append(entry.name)
        elif entry.is_file(follow_symlinks=False):
            yield path
    if depth >= MAX_DEPTH:
        return
    for name in folders:
        try:
            child = os.open(name, _DIRECTORY_FLAGS, dir_fd=fd)
        except OSError as exc:  # swapped for a link since the listing (not followed), or removed
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                on_link(folder / name)
            continue
        try:
            yield from _walk(child, folder / name, on_link, depth + 1)
        finally:
            os.close(child)
