"""Safe, streaming extraction of uploaded archives (zip, tar, tar.gz/tgz, tar.bz2, tar.xz).

Rules (DESIGN.md section 8):
- only regular files and folders; symlinks, hardlinks, devices, FIFOs are refused by name;
- no absolute paths, no `..` components, no drive letters or backslash tricks;
- caps on expanded bytes, member count and compression ratio, counted on what is really
  written and really read while streaming, never taken from headers;
- extraction goes into a fresh, empty folder; on any refusal that folder is removed, so a
  refused archive leaves nothing behind.
The archive type is identified by content, not by its file name.
"""

from __future__ import annotations

import shutil
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

CHUNK = 1 << 20


class ArchiveError(ValueError):
    """The archive was refused; the message names the member and the rule."""


@dataclass(frozen=True)
class Caps:
    max_bytes: int
    max_members: int
    max_ratio: float
    ratio_grace_bytes: int = 1 << 20


class _CountingReader:
    """A file wrapper counting the archive bytes really read, for the compression ratio."""

    def __init__(self, fh):
        self._fh = fh
        self.bytes_read = 0

    def read(self, size=-1):
        data = self._fh.read(size)
        self.bytes_read += len(data)
        return data

    def seek(self, offset, whence=0):
        return self._fh.seek(offset, whence)

    def tell(self):
        return self._fh.tell()

    def seekable(self):
        return True

    def readable(self):
        return True

    def close(self):
        pass


def archive_kind(path: Path) -> str | None:
    """'zip' or 'tar' by content (gzip/bzip2/xz-compressed tars included), or None."""
    try:
        if zipfile.is_zipfile(path):
            return "zip"
        with tarfile.open(path, mode="r:*") as tar:
            tar.next()
        return "tar"
    except (tarfile.TarError, OSError, EOFError):
        return None


def safe_member_path(name: str) -> PurePosixPath:
    """The relative path a member may be extracted to, or ArchiveError."""
    if "\x00" in name:
        raise ArchiveError(f"member {name!r}: NUL byte in the name")
    if "\\" in name:
        raise ArchiveError(f"member {name!r}: backslash in the name (Windows path tricks are refused)")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise ArchiveError(f"member {name!r}: absolute path")
    parts = [p for p in PurePosixPath(name).parts if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise ArchiveError(f"member {name!r}: path contains '..'")
    if not parts:
        return PurePosixPath(".")
    return PurePosixPath(*parts)


class _Budget:
    def __init__(self, caps: Caps, reader: _CountingReader, tick=None):
        self.caps = caps
        self.reader = reader
        self.tick = tick
        self.members = 0
        self.bytes = 0

    def member(self, name: str) -> None:
        self.members += 1
        if self.tick is not None:
            self.tick(self.members, self.bytes)
        if self.members > self.caps.max_members:
            raise ArchiveError(f"archive has more than {self.caps.max_members} members (cap reached at {name!r})")

    def wrote(self, n: int, name: str) -> None:
        self.bytes += n
        if self.bytes > self.caps.max_bytes:
            raise ArchiveError(
                f"archive expands past the cap of {self.caps.max_bytes} bytes (while extracting {name!r})"
            )
        if self.bytes > self.caps.ratio_grace_bytes:
            ratio = self.bytes / max(self.reader.bytes_read, 1)
            if ratio > self.caps.max_ratio:
                raise ArchiveError(
                    f"compression ratio {ratio:.0f}:1 passes the cap of {self.caps.max_ratio:g}:1 "
                    f"(while extracting {name!r}); this looks like a zip bomb"
                )


def _copy(src, dest: Path, budget: _Budget, name: str) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "xb") as out:
        while True:
            data = src.read(CHUNK)
            if not data:
                break
            budget.wrote(len(data), name)
            out.write(data)


def _extract_zip(reader: _CountingReader, dest: Path, budget: _Budget) -> None:
    with zipfile.ZipFile(reader) as archive:  # type: ignore[arg-type]
        for info in archive.infolist():
            budget.member(info.filename)
            rel = safe_member_path(info.filename)
            mode = info.external_attr >> 16
            kind = stat.S_IFMT(mode)
            if stat.S_ISLNK(mode):
                raise ArchiveError(f"member {info.filename!r}: symbolic link")
            if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
                raise ArchiveError(f"member {info.filename!r}: not a regular file or folder")
            if info.flag_bits & 0x1:
                raise ArchiveError(f"member {info.filename!r}: encrypted members are not supported")
            target = dest / rel
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            with archive.open(info) as src:
                _copy(src, target, budget, info.filename)


def _extract_tar(reader: _CountingReader, dest: Path, budget: _Budget) -> None:
    # "r|*" is the streaming mode: members are read in order, one pass, no seeking back.
    with tarfile.open(fileobj=reader, mode="r|*") as archive:  # type: ignore[call-overload]
        for member in archive:
            budget.member(member.name)
            rel = safe_member_path(member.name)
            if member.issym():
                raise ArchiveError(f"member {member.name!r}: symbolic link")
            if member.islnk():
                raise ArchiveError(f"member {member.name!r}: hard link")
            if member.isdev():
                raise ArchiveError(f"member {member.name!r}: device or FIFO")
            if member.isdir():
                (dest / rel).mkdir(parents=True, exist_ok=True)
                continue
            if not member.isreg():
                raise ArchiveError(f"member {member.name!r}: not a regular file or folder")
            src = archive.extractfile(member)
            if src is None:
                raise ArchiveError(f"member {member.name!r}: cannot be read")
            with src:
                _copy(src, dest / rel, budget, member.name)


def extract_archive(archive: Path, dest: Path, caps: Caps, tick=None) -> dict:
    """Extract `archive` into the new folder `dest`; returns {"members", "bytes"}.

    Raises ArchiveError (and removes `dest`) when anything is refused. `tick(members, bytes)` is
    called before each member; an exception it raises (a cancel) also removes `dest`.
    """
    kind = archive_kind(archive)
    if kind is None:
        raise ArchiveError(f"{archive.name}: not a zip or tar archive (identified by content)")
    dest.mkdir(parents=True, exist_ok=False)
    try:
        with open(archive, "rb") as fh:
            reader = _CountingReader(fh)
            budget = _Budget(caps, reader, tick)
            if kind == "zip":
                _extract_zip(reader, dest, budget)
            else:
                _extract_tar(reader, dest, budget)
    except ArchiveError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    except FileExistsError as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise ArchiveError(f"member {Path(exc.filename).name!r} appears twice in the archive") from None
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, RuntimeError) as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise ArchiveError(f"{archive.name}: damaged archive ({exc})") from None
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return {"members": budget.members, "bytes": budget.bytes}
