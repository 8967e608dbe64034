"""Hostile archives are refused by name and rule, and leave nothing behind."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile

import pytest

from datasets.archives import ArchiveError, Caps, extract_archive

CAPS = Caps(max_bytes=10_000_000, max_members=1000, max_ratio=100.0, ratio_grace_bytes=64 * 1024)


def _tar(path, members):
    """members: list of (TarInfo, bytes or None)."""
    with tarfile.open(path, "w:gz") as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name, data=b"x"):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _special(name, kind, linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, None


@pytest.mark.parametrize(
    ("member", "message"),
    [
        (_special("cats/evil", tarfile.SYMTYPE, "/etc/passwd"), "symbolic link"),
        (_special("cats/hard", tarfile.LNKTYPE, "cats/a.png"), "hard link"),
        (_special("cats/dev", tarfile.CHRTYPE), "device"),
        (_special("cats/fifo", tarfile.FIFOTYPE), "device or FIFO"),
        (_file("/etc/cron.d/evil"), "absolute path"),
        (_file("cats/../../escape.png"), "'..'"),
        (_file("..\\windows.png"), "backslash"),
    ],
    ids=["symlink", "hardlink", "device", "fifo", "absolute", "dotdot", "backslash"],
)
def test_it_refuses_unsafe_tar_members_and_leaves_nothing(tmp_path, member, message):
    archive = _tar(tmp_path / "evil.tar.gz", [_file("cats/a.png", b"ok"), member])
    dest = tmp_path / "out"
    with pytest.raises(ArchiveError, match=message):
        extract_archive(archive, dest, CAPS)
    assert not dest.exists()
    assert not (tmp_path / "escape.png").exists()


def test_it_refuses_a_symlink_inside_a_zip(tmp_path):
    archive = tmp_path / "link.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo("cats/link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(ArchiveError, match="symbolic link"):
        extract_archive(archive, tmp_path / "out", CAPS)
    assert not (tmp_path / "out").exists()


def test_it_stops_a_zip_bomb_by_ratio_while_streaming(tmp_path):
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("cats/zeros.png", b"\0" * 5_000_000)  # ~5 KB compressed, 1000:1
    with pytest.raises(ArchiveError, match="compression ratio"):
        extract_archive(archive, tmp_path / "out", CAPS)
    assert not (tmp_path / "out").exists()


def test_it_caps_the_bytes_really_written(tmp_path):
    archive = tmp_path / "big.tar"  # uncompressed: the ratio cap cannot fire, the byte cap must
    with tarfile.open(archive, "w") as tf:
        for i in range(3):
            info, data = _file(f"cats/{i}.bin", b"\1" * 400_000)
            tf.addfile(info, io.BytesIO(data))
    caps = Caps(max_bytes=1_000_000, max_members=1000, max_ratio=100.0)
    with pytest.raises(ArchiveError, match="expands past the cap of 1000000 bytes"):
        extract_archive(archive, tmp_path / "out", caps)
    assert not (tmp_path / "out").exists()


def test_it_caps_the_member_count(tmp_path):
    archive = _tar(tmp_path / "many.tar.gz", [_file(f"cats/{i}.png") for i in range(20)])
    caps = Caps(max_bytes=10_000_000, max_members=10, max_ratio=1000.0)
    with pytest.raises(ArchiveError, match="more than 10 members"):
        extract_archive(archive, tmp_path / "out", caps)
    assert not (tmp_path / "out").exists()


def test_it_refuses_a_file_that_is_not_an_archive(tmp_path):
    fake = tmp_path / "photos.zip"
    fake.write_bytes(b"not really a zip")
    with pytest.raises(ArchiveError, match="not a zip or tar archive"):
        extract_archive(fake, tmp_path / "out", CAPS)


def test_it_extracts_unicode_names_and_nested_folders(tmp_path):
    archive = _tar(tmp_path / "ok.tgz", [_file("chats/été/ü.png", b"1"), _file("./chiens/日本.png", b"2")])
    report = extract_archive(archive, tmp_path / "out", CAPS)
    assert (tmp_path / "out/chats/été/ü.png").read_bytes() == b"1"
    assert (tmp_path / "out/chiens/日本.png").read_bytes() == b"2"
    assert report == {"members": 2, "bytes": 2, "skipped": []}


def test_it_stops_extracting_when_told_and_leaves_nothing(tmp_path):
    archive = _tar(tmp_path / "many.tar.gz", [_file(f"cats/{i}.png") for i in range(50)])

    class Cancelled(Exception):
        pass

    def tick(members, nbytes):
        if members > 10:
            raise Cancelled()

    with pytest.raises(Cancelled):
        extract_archive(archive, tmp_path / "out", CAPS, tick=tick)
    assert not (tmp_path / "out").exists()


def test_it_is_not_fooled_by_a_zip_header_that_understates_the_size(tmp_path):
    import struct

    archive = tmp_path / "liar.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("cats/a.png", b"\0" * 5_000_000)
    data = bytearray(archive.read_bytes())
    # Claim 100 bytes in both the local header (offset 22) and the central directory (offset 24).
    struct.pack_into("<I", data, 22, 100)
    central = data.index(b"PK\x01\x02")
    struct.pack_into("<I", data, central + 24, 100)
    archive.write_bytes(bytes(data))
    caps = Caps(max_bytes=1_000_000, max_members=10, max_ratio=1e9, ratio_grace_bytes=0)
    # Python's zip reader stops at the claimed size and the checksum then fails: refused as damaged.
    with pytest.raises(ArchiveError, match="damaged archive .*CRC"):
        extract_archive(archive, tmp_path / "out", caps)
    assert not (tmp_path / "out").exists()
