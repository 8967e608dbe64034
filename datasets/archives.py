"""Safe, streaming extraction of uploaded archives (zip, tar, tar.gz/tgz, tar.bz2, tar.xz).

Rules (DESIGN.md section 8):
- only regular files and folders; symlinks, hardlinks, devices, FIFOs are refused by name;
- no absolute paths, no `..` components, no drive letters or backslash tricks;
- caps on expanded bytes, member count and compression ratio, counted on what is really
  written and really read while streaming, never taken from headers;
- extraction goes into a fresh, empty folder; on any refusal that folder is removed, so a
  refused archive leaves nothing behind.
The archive type is identified by content, not by its file name.

A member whose name is not UTF-8 (a tar from a latin-1 system, a zip whose UTF-8 flag lies) is
not written and not a refusal: it is listed in `skipped` by its readable name (datasets.names),
and so is a member whose name the file system cannot hold (a component over 255 bytes).
Messages name members as the archive does, never by the folder they are extracted into.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import shutil
import stat
import struct
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from datasets.names import NOT_UTF8, is_utf8, os_error_text, readable

CHUNK = 1 << 20
ZIP_UTF8_FLAG = 0x800


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
        # Bytes shown changed to the zip reader: {file offset: byte} (see _zip_name_patches).
        self._patch_offsets: list[int] = []
        self._patch_bytes: list[int] = []

    def set_patches(self, patches: dict[int, int]) -> None:
        self._patch_offsets = sorted(patches)
        self._patch_bytes = [patches[o] for o in self._patch_offsets]

    def read(self, size=-1):
        start = self._fh.tell() if self._patch_offsets else 0
        data = self._fh.read(size)
        self.bytes_read += len(data)
        if self._patch_offsets and data:
            first = bisect.bisect_left(self._patch_offsets, start)
            last = bisect.bisect_left(self._patch_offsets, start + len(data))
            if first < last:
                patched = bytearray(data)
                for i in range(first, last):
                    patched[self._patch_offsets[i] - start] = self._patch_bytes[i]
                data = bytes(patched)
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


def _skip(skipped: list[dict], name: str, reason: str) -> None:
    skipped.append({"path": readable(name), "reason": reason})


@contextlib.contextmanager
def _writing(name: str, skipped: list[dict]):
    """Around writing one member: a name too long for the file system skips the member; any other
    OS error refuses the archive, naming the member and the error, not the folder written to."""
    try:
        yield
    except FileExistsError:
        raise  # extract_archive: the member appears twice
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise ArchiveError(f"member {readable(name)!r}: cannot be extracted ({os_error_text(exc)})") from None
        _skip(skipped, name, f"cannot be extracted ({exc.strerror})")


def _copy(src, dest: Path, budget: _Budget, name: str) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "xb") as out:
        while True:
            data = src.read(CHUNK)
            if not data:
                break
            budget.wrote(len(data), name)
            out.write(data)


def _zip_name_patches(reader: _CountingReader) -> tuple[dict[int, int], dict[int, bytes]]:
    """For each central-directory entry flagged UTF-8 whose name is not: the byte that clears the
    flag ({file offset: new byte}) and the raw name ({local header offset: bytes}).

    Python's zip reader decodes a flagged name as strict UTF-8 and refuses the whole archive on
    the first bad one; with the flag cleared it decodes that name as cp437 (any bytes pass), and
    the member is then skipped by its local header offset. The walk mirrors
    zipfile.ZipFile._RealGetContents (same end-record helper and offsets).
    """
    endrec = zipfile._EndRecData(reader)  # type: ignore[attr-defined]
    if not endrec:
        return {}, {}
    size_cd, offset_cd = endrec[zipfile._ECD_SIZE], endrec[zipfile._ECD_OFFSET]  # type: ignore[attr-defined]
    concat = endrec[zipfile._ECD_LOCATION] - size_cd - offset_cd  # type: ignore[attr-defined]
    if endrec[zipfile._ECD_SIGNATURE] == zipfile.stringEndArchive64:  # type: ignore[attr-defined]
        concat -= zipfile.sizeEndCentDir64 + zipfile.sizeEndCentDir64Locator
    start = offset_cd + concat
    reader.seek(start)
    data = reader.read(size_cd)
    patches: dict[int, int] = {}
    names: dict[int, bytes] = {}
    pos = 0
    while pos + zipfile.sizeCentralDir <= len(data):
        header = struct.unpack(zipfile.structCentralDir, data[pos : pos + zipfile.sizeCentralDir])
        if header[0] != zipfile.stringCentralDir:
            break
        flags, name_len = header[zipfile._CD_FLAG_BITS], header[zipfile._CD_FILENAME_LENGTH]  # type: ignore[attr-defined]
        name_at = pos + zipfile.sizeCentralDir
        raw = data[name_at : name_at + name_len]
        if flags & ZIP_UTF8_FLAG:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                # The flags are a little-endian uint16 at offset 8: bit 11 lives in byte 9.
                patches[start + pos + 9] = data[pos + 9] & ~(ZIP_UTF8_FLAG >> 8)
                names[header[zipfile._CD_LOCAL_HEADER_OFFSET] + concat] = raw  # type: ignore[attr-defined]
        pos = (
            name_at
            + name_len
            + header[zipfile._CD_EXTRA_FIELD_LENGTH]  # type: ignore[attr-defined]
            + header[zipfile._CD_COMMENT_LENGTH]  # type: ignore[attr-defined]
        )
    return patches, names


def open_zip(fh) -> tuple[zipfile.ZipFile, dict[int, bytes]]:
    """The zip in the open binary file `fh`, readable even when some names flagged UTF-8 are not;
    and those members' raw names by local header offset (they must be skipped, not extracted)."""
    reader = fh if isinstance(fh, _CountingReader) else _CountingReader(fh)
    try:
        return zipfile.ZipFile(reader), {}  # type: ignore[arg-type]
    except UnicodeDecodeError:
        patches, names = _zip_name_patches(reader)
        if not patches:
            raise
        reader.set_patches(patches)
        return zipfile.ZipFile(reader), names  # type: ignore[arg-type]


def _extract_zip(reader: _CountingReader, dest: Path, budget: _Budget, skipped: list[dict]) -> None:
    archive, bad_names = open_zip(reader)
    with archive:
        for info in archive.infolist():
            if info.header_offset in bad_names:
                budget.member(readable(bad_names[info.header_offset]))
                _skip(skipped, bad_names[info.header_offset], NOT_UTF8)
                continue
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
                with _writing(info.filename, skipped):
                    target.mkdir(parents=True, exist_ok=True)
                continue
            with _writing(info.filename, skipped), archive.open(info) as src:
                _copy(src, target, budget, info.filename)


def _extract_tar(reader: _CountingReader, dest: Path, budget: _Budget, skipped: list[dict]) -> None:
    # "r|*" is the streaming mode: members are read in order, one pass, no seeking back. The names
    # are decoded as UTF-8 whatever the locale, with surrogate escapes for bytes that are not.
    with tarfile.open(  # type: ignore[call-overload]
        fileobj=reader, mode="r|*", encoding="utf-8", errors="surrogateescape"
    ) as archive:
        for member in archive:
            budget.member(readable(member.name))
            if not is_utf8(member.name):
                _skip(skipped, member.name, NOT_UTF8)
                continue
            rel = safe_member_path(member.name)
            if member.issym():
                raise ArchiveError(f"member {member.name!r}: symbolic link")
            if member.islnk():
                raise ArchiveError(f"member {member.name!r}: hard link")
            if member.isdev():
                raise ArchiveError(f"member {member.name!r}: device or FIFO")
            if member.isdir():
                with _writing(member.name, skipped):
                    (dest / rel).mkdir(parents=True, exist_ok=True)
                continue
            if not member.isreg():
                raise ArchiveError(f"member {member.name!r}: not a regular file or folder")
            src = archive.extractfile(member)
            if src is None:
                raise ArchiveError(f"member {member.name!r}: cannot be read")
            with _writing(member.name, skipped), src:
                _copy(src, dest / rel, budget, member.name)


def extract_archive(archive: Path, dest: Path, caps: Caps, tick=None, *, display_name: str | None = None) -> dict:
    """Extract `archive` into the new folder `dest`; returns {"members", "bytes", "skipped"}, the
    last a list of {"path", "reason"} for members left out (see the module docstring).

    Raises ArchiveError (and removes `dest`) when anything is refused; its message calls the
    archive `display_name` (default: its file name). `tick(members, bytes)` is called before each
    member; an exception it raises (a cancel) also removes `dest`.
    """
    name = display_name or archive.name
    kind = archive_kind(archive)
    if kind is None:
        raise ArchiveError(f"{name}: not a zip or tar archive (identified by content)")
    dest.mkdir(parents=True, exist_ok=False)
    skipped: list[dict] = []
    try:
        with open(archive, "rb") as fh:
            reader = _CountingReader(fh)
            budget = _Budget(caps, reader, tick)
            if kind == "zip":
                _extract_zip(reader, dest, budget, skipped)
            else:
                _extract_tar(reader, dest, budget, skipped)
    except ArchiveError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    except FileExistsError as exc:
        shutil.rmtree(dest, ignore_errors=True)
        member = readable(Path(exc.filename).name) if exc.filename else "?"
        raise ArchiveError(f"member {member!r} appears twice in the archive") from None
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, RuntimeError, UnicodeDecodeError) as exc:
        # OSError's text would carry a path inside `dest`; the error itself is enough.
        shutil.rmtree(dest, ignore_errors=True)
        raise ArchiveError(f"{name}: damaged archive ({os_error_text(exc)})") from None
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return {"members": budget.members, "bytes": budget.bytes, "skipped": skipped}
