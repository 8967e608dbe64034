"""Names that are not UTF-8 (tar members, zip members flagged UTF-8, files on the server) are
skipped and reported by a readable form; no message of a build shows a path inside the data dir."""

from __future__ import annotations

import errno
import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from django.conf import settings

from datasets import building, services
from datasets.models import Dataset
from tests.datasets.conftest import image_bytes, make_class_folders
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db

GOOD = ("a/1.png", "a/2.png", "b/1.png", "b/2.png")


def _build(owner, path: Path, *, kind: str, **options) -> Dataset:
    options = {"val_percent": 0, "image_width": 6, "image_height": 6, **options}
    dataset = services.dataset_create(
        owner=owner, name="t", kind=kind, source={"path": str(path)}, options=options, queue=False
    )
    building.dataset_build(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    return dataset


def _messages(dataset: Dataset) -> str:
    """What a user can read about the build: its error and its skipped-files report."""
    return dataset.error + json.dumps(services.dataset_skipped(dataset=dataset), ensure_ascii=False)


def _assert_no_internal_path(text: str) -> None:
    # (The tests' import root lies inside their data dir, so the check is on the data dir's own
    # areas: the datasets with their temp folders, and the uploads.)
    for area in ("datasets", "uploads"):
        assert str(settings.DATA_DIR / area) not in text
    assert ".extract-" not in text and ".building-" not in text


def _tar_with_latin1_name(path: Path) -> Path:
    # GNU format keeps the name as raw bytes in the header; latin-1 makes 'é' the byte 0xE9.
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT, encoding="latin-1") as tf:
        for name in (*GOOD, "a/café.png", "été/1.png", "été/2.png"):
            data = image_bytes()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _zip_with_bad_utf8_name(path: Path) -> Path:
    # zipfile writes 'é' as UTF-8 (C3 A9) and sets the UTF-8 flag (0x800) in both headers; the
    # name's bytes are then overwritten in place with E9 E9, which is not UTF-8.
    with zipfile.ZipFile(path, "w") as zf:
        for name in (*GOOD, "a/café.png"):
            zf.writestr(name, image_bytes())
    data = path.read_bytes()
    name = "a/café.png".encode()
    assert data.count(name) == 2  # the local header and the central directory
    data = data.replace(name, b"a/caf\xe9\xe9.png")
    with pytest.raises(UnicodeDecodeError):  # the flag is still set: Python's reader refuses it all
        zipfile.ZipFile(io.BytesIO(data))
    path.write_bytes(data)
    return path


def test_it_skips_a_tar_member_whose_name_is_not_utf8_and_builds_the_rest(owner, import_root):
    archive = _tar_with_latin1_name(import_root / "latin1.tar.gz")
    dataset = _build(owner, archive, kind="archive")
    assert dataset.status == "ready", dataset.error
    assert dataset.splits["train"]["class_counts"] == [2, 2]
    assert dataset.labels == ["a", "b"]  # 'été' in latin-1 is no class: its name is not UTF-8
    skipped = services.dataset_skipped(dataset=dataset)
    assert skipped == [
        {"path": name, "reason": "name is not valid UTF-8 (shown with \\x escapes)"}
        for name in ("a/caf\\xe9.png", "\\xe9t\\xe9/1.png", "\\xe9t\\xe9/2.png")
    ]
    assert dataset.skipped_count == 3
    _assert_no_internal_path(_messages(dataset))


def test_it_skips_a_zip_member_flagged_utf8_with_invalid_bytes(owner, import_root):
    archive = _zip_with_bad_utf8_name(import_root / "flagged.zip")
    dataset = _build(owner, archive, kind="archive")
    assert dataset.status == "ready", dataset.error
    assert dataset.splits["train"]["class_counts"] == [2, 2]
    skipped = services.dataset_skipped(dataset=dataset)
    assert skipped == [{"path": "a/caf\\xe9\\xe9.png", "reason": "name is not valid UTF-8 (shown with \\x escapes)"}]
    _assert_no_internal_path(_messages(dataset))


def test_it_skips_server_files_and_class_folders_whose_names_are_not_utf8(owner, import_root):
    root = make_class_folders(import_root / "src", {"a": 2, "b": 2})
    folder = os.fsencode(root)
    with open(folder + b"/a/caf\xe9.png", "wb") as out:
        out.write(image_bytes())
    os.mkdir(folder + b"/\xe9t\xe9")  # a class folder: its name would become a label
    with open(folder + b"/\xe9t\xe9/1.png", "wb") as out:
        out.write(image_bytes())
    dataset = _build(owner, root, kind="folder")
    assert dataset.status == "ready", dataset.error
    assert dataset.labels == ["a", "b"]
    reasons = {s["path"]: s["reason"] for s in services.dataset_skipped(dataset=dataset)}
    assert reasons == {
        "\\xe9t\\xe9": "name is not valid UTF-8 (shown with \\x escapes)",
        "a/caf\\xe9.png": "name is not valid UTF-8 (shown with \\x escapes)",
    }
    _assert_no_internal_path(_messages(dataset))


def test_it_names_the_archive_not_the_extract_folder_when_a_class_is_missing(owner, import_root):
    with zipfile.ZipFile(import_root / "one.zip", "w") as zf:
        for name in ("photos/only/1.png", "photos/only/2.png"):
            zf.writestr(name, image_bytes())
    dataset = _build(owner, import_root / "one.zip", kind="archive")
    assert dataset.status == "failed"
    assert dataset.error.startswith("one.zip: a classifier needs at least 2 classes"), dataset.error
    _assert_no_internal_path(dataset.error)


def test_it_skips_a_member_whose_name_is_too_long_for_the_disk(owner, import_root):
    long_name = "a/" + "x" * 300 + ".png"  # one path component past the 255 bytes of Linux file systems
    with zipfile.ZipFile(import_root / "long.zip", "w") as zf:
        for name in (*GOOD, long_name):
            zf.writestr(name, image_bytes())
    dataset = _build(owner, import_root / "long.zip", kind="archive")
    assert dataset.status == "ready", dataset.error
    [skipped] = services.dataset_skipped(dataset=dataset)
    assert skipped == {"path": long_name, "reason": "cannot be extracted (File name too long)"}
    _assert_no_internal_path(_messages(dataset))


def test_it_shows_paths_relative_to_the_archive_in_the_skipped_report(owner, import_root):
    with zipfile.ZipFile(import_root / "wrapped.zip", "w") as zf:
        for name in GOOD:
            zf.writestr(f"photos/{name}", image_bytes())
        zf.writestr("photos/b/notes.png", b"text, not pixels")
    dataset = _build(owner, import_root / "wrapped.zip", kind="archive")
    assert dataset.status == "ready", dataset.error
    [skipped] = services.dataset_skipped(dataset=dataset)
    assert skipped["path"] == "photos/b/notes.png" and skipped["reason"].startswith("not an image")
    _assert_no_internal_path(_messages(dataset))


def test_it_keeps_internal_paths_out_of_an_unexpected_build_error(owner, import_root, monkeypatch):
    # A full disk is what this machine cannot be made to have: the writer's OSError is injected,
    # with the temp folder in it exactly as the OS would name it.
    root = make_class_folders(import_root / "src", {"a": 2, "b": 2})

    def disk_full(split_entries, labels, out_dir, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(out_dir / "train_db" / "data.mdb"))

    monkeypatch.setattr(building, "build_lmdbs", disk_full)
    dataset = _build(owner, root, kind="folder")
    assert dataset.status == "failed"
    assert dataset.error == "Internal error while building (OSError: No space left on device); see the server log."
    _assert_no_internal_path(dataset.error)


def test_it_previews_a_zip_whose_flagged_names_are_not_all_utf8(owner_client, owner, tmp_path):
    from datasets.uploads import upload_save

    archive = _zip_with_bad_utf8_name(tmp_path / "flagged.zip")

    class Uploaded:
        name = "flagged.zip"

        def chunks(self):
            yield archive.read_bytes()

    token, _ = upload_save(user_id=owner.pk, uploaded_file=Uploaded())
    response = owner_client.post("/datasets/new/preview/", {"upload": token, "image_width": 10, "image_height": 10})
    assert response.status_code == 200, response.content[:300]
    assert response.json()["file"] == "a/1.png"


def test_it_answers_400_without_paths_when_a_previewed_zip_is_damaged(owner_client, owner, tmp_path):
    from datasets.uploads import upload_save

    archive = _zip_with_bad_utf8_name(tmp_path / "cut.zip")
    data = archive.read_bytes()
    central = data.index(b"PK\x01\x02")
    data = data[:central] + b"\0" * 4 + data[central + 4 :]  # the first directory entry's signature

    class Uploaded:
        name = "cut.zip"

        def chunks(self):
            yield data

    token, _ = upload_save(user_id=owner.pk, uploaded_file=Uploaded())
    response = owner_client.post("/datasets/new/preview/", {"upload": token, "image_width": 10, "image_height": 10})
    assert response.status_code == 400
    [message] = response.json()["errors"]["__all__"]
    assert message.startswith("cut.zip: damaged archive"), message
    _assert_no_internal_path(message)


def test_it_gives_a_reason_without_the_server_path_for_an_unreadable_list_entry(owner, import_root):
    root = make_class_folders(import_root / "images", {"a": 2, "b": 2})
    (root / "a" / "folder.png").mkdir()  # listed as an image, but a folder: the OS error names its path
    (import_root / "labels.txt").write_text("a\nb\n")
    lines = ["a/img_0.png 0", "a/img_1.png 0", "b/img_0.png 1", "b/img_1.png 1", "a/folder.png 0"]
    (import_root / "train.txt").write_text("\n".join(lines) + "\n")
    dataset = services.dataset_create(
        owner=owner,
        name="t",
        kind="textlist",
        source={
            "path": str(import_root / "train.txt"),
            "labels": str(import_root / "labels.txt"),
            "image_folder": str(root),
        },
        options={"val_percent": 0, "image_width": 6, "image_height": 6},
        queue=False,
    )
    building.dataset_build(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    assert dataset.status == "ready", dataset.error
    [skipped] = services.dataset_skipped(dataset=dataset)
    # Refused at the open (datasets.labels.prepare.open_image), in the scan's words for a folder's odd file.
    assert skipped == {"path": "a/folder.png", "split": "train", "reason": "not a regular file"}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_builds_an_uploaded_latin1_tar_through_the_worker(celery_worker, owner, client, tmp_path):
    client.force_login(owner)
    archive = _tar_with_latin1_name(tmp_path / "latin1.tar.gz")
    with archive.open("rb") as fh:
        response = client.post("/api/datasets/", {"name": "w", "archive": fh, "image_width": 6, "image_height": 6})
    assert response.status_code == 201, response.content[:300]
    pk = response.json()["id"]
    wait_until(
        lambda: Dataset.objects.get(pk=pk).status in ("ready", "failed"),
        what="the worker to finish the build",
        timeout=90,
    )
    body = client.get(f"/api/datasets/{pk}/").json()
    assert body["status"] == "ready", body["error"]
    skipped = client.get(f"/datasets/{pk}/skipped.json").json()
    assert [s["path"] for s in skipped] == ["a/caf\\xe9.png", "\\xe9t\\xe9/1.png", "\\xe9t\\xe9/2.png"]
    page = client.get(f"/datasets/{pk}/").content.decode()
    assert "a/caf\\xe9.png" in page
    _assert_no_internal_path(json.dumps(skipped) + body["error"])
    assert ".extract-" not in page and ".building-" not in page


def test_it_skips_a_class_folder_whose_name_holds_a_line_break_naming_it(owner, import_root):
    # "x\ny" became two lines of labels.txt: one more line than classes, and an exported bundle
    # failed to load (size mismatch). Tabs and other control characters break it the same way.
    archive = import_root / "breaks.tar"
    with tarfile.open(archive, "w") as tar:
        for name in (*GOOD, "x\ny/1.png", "x\ny/2.png", "t\tab/1.png", "t\tab/2.png"):
            data = image_bytes()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    dataset = _build(owner, archive, kind="archive")
    assert dataset.status == "ready", dataset.error
    assert dataset.labels == ["a", "b"]
    reasons = {s["path"]: s["reason"] for s in services.dataset_skipped(dataset=dataset)}
    assert reasons == {
        "t\\tab": "class name holds a control character such as a line break or a tab (shown escaped)",
        "x\\ny": "class name holds a control character such as a line break or a tab (shown escaped)",
    }
    assert (Path(dataset.path) / "labels.txt").read_text().splitlines() == ["a", "b"]


def test_it_refuses_a_labels_file_line_with_a_control_character(import_root):
    from datasets.sources import SourceError, read_labels_file

    (import_root / "labels.txt").write_text("cat\ndog\x1bred\n")
    with pytest.raises(SourceError, match=r"line 2: 'dog\\\\x1bred': class name holds a control character"):
        read_labels_file(import_root / "labels.txt")
