"""Links in classification sources and in format detection are never followed: a labels file, a
text list and the images it names, an image swapped for a link after the scan, and the folders
format detection looks at. Each link points at another user's folder inside the import root
(so the roots check alone would let it through) or at a secret outside it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from datasets import building, services, sources
from datasets.labels import detect_format
from datasets.labels.common import LabelError
from datasets.labels.plan import label_check
from datasets.names import LINK_NOT_FOLLOWED
from datasets.sources import SourceError, SplitOptions, plan_text_lists, read_labels_file
from datasets.validators import propose_task
from tests.datasets.conftest import make_class_folders
from tests.support.shapes import make_shapes, write_kitti

SECRET = "TOPSECRET-key-of-the-server"


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"  # outside the import root
    secret.write_text(f"{SECRET}\n{SECRET}-2\n")
    return secret


def _build(owner, *, kind: str, source: dict, **options):
    dataset = services.dataset_create(
        owner=owner,
        name="links",
        kind=kind,
        source=source,
        options={"val_percent": 0, "min_per_class": 1, "image_width": 6, "image_height": 6, **options},
        queue=False,
    )
    building.dataset_build(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    return dataset


def test_it_refuses_a_linked_labels_file_and_names_it(import_root, tmp_path):
    (import_root / "labels.txt").symlink_to(_secret(tmp_path))
    (import_root / "train.txt").write_text("a.png 0\n")
    for read in (
        lambda: read_labels_file(import_root / "labels.txt"),
        lambda: plan_text_lists(import_root / "train.txt", import_root / "labels.txt", SplitOptions()),
    ):
        with pytest.raises(SourceError) as refused:
            read()
        assert str(refused.value) == f"labels file labels.txt: {LINK_NOT_FOLLOWED}"
        assert SECRET not in str(refused.value)


def test_it_refuses_a_linked_text_list_and_names_it(import_root, tmp_path):
    (import_root / "labels.txt").write_text("a\nb\n")
    secret = _secret(tmp_path)
    secret.write_text("a.png 0\nb.png 1\n")
    (import_root / "train.txt").symlink_to(secret)
    with pytest.raises(SourceError, match=f"^text list train.txt: {LINK_NOT_FOLLOWED}$"):
        plan_text_lists(import_root / "train.txt", import_root / "labels.txt", SplitOptions())


@pytest.mark.django_db
def test_it_skips_the_images_a_text_list_names_through_links(owner, import_root):
    mine = make_class_folders(import_root / "mine", {"a": 2, "b": 2})
    theirs = make_class_folders(import_root / "theirs", {"x": 2})  # another user's folder, inside the root
    (mine / "a" / "linked.png").symlink_to(theirs / "x" / "img_0.png")
    (mine / "via").symlink_to(theirs / "x")  # a linked folder on the way
    (import_root / "labels.txt").write_text("a\nb\n")
    lines = ["a/img_0.png 0", "a/img_1.png 0", "b/img_0.png 1", "b/img_1.png 1", "a/linked.png 0", "via/img_1.png 1"]
    (import_root / "train.txt").write_text("\n".join(lines) + "\n")
    source = {
        "path": str(import_root / "train.txt"),
        "labels": str(import_root / "labels.txt"),
        "image_folder": str(mine),
    }
    dataset = _build(owner, kind="textlist", source=source)
    assert dataset.status == "ready", dataset.error
    skipped = {s["path"]: s["reason"] for s in services.dataset_skipped(dataset=dataset)}
    assert skipped == {"a/linked.png": LINK_NOT_FOLLOWED, "via/img_1.png": f"via: {LINK_NOT_FOLLOWED}"}
    assert dataset.splits["train"]["class_counts"] == [2, 2]


@pytest.mark.django_db
def test_it_skips_an_image_swapped_for_a_link_after_the_scan(owner, import_root, monkeypatch):
    root = make_class_folders(import_root / "src", {"a": 2, "b": 2})
    theirs = make_class_folders(import_root / "theirs", {"x": 1}, size=(30, 30))
    scan = building.plan_folder

    def scan_then_swap(*args, **kwargs):
        plan = scan(*args, **kwargs)  # the scan saw a regular file; the build must not read the link
        (root / "a" / "img_0.png").unlink()
        (root / "a" / "img_0.png").symlink_to(theirs / "x" / "img_0.png")
        return plan

    monkeypatch.setattr(building, "plan_folder", scan_then_swap)
    dataset = _build(owner, kind="folder", source={"path": str(root)})
    assert dataset.status == "ready", dataset.error
    skipped = {s["path"]: s["reason"] for s in services.dataset_skipped(dataset=dataset)}
    assert skipped == {"a/img_0.png": LINK_NOT_FOLLOWED}
    assert dataset.splits["train"]["class_counts"] == [1, 2]


def test_it_lists_nothing_of_a_class_folder_swapped_for_a_link_after_the_scan(import_root, monkeypatch):
    root = make_class_folders(import_root / "src", {"a": 2, "b": 2})
    theirs = make_class_folders(import_root / "theirs", {"secret_name": 1})
    listed = sources._class_files

    def swap_then_list(class_dir, *args):
        if class_dir.name == "a":  # the scan saw a folder; a link to another's stands there now
            shutil.rmtree(class_dir)
            class_dir.symlink_to(theirs / "secret_name", target_is_directory=True)
        return listed(class_dir, *args)

    monkeypatch.setattr(sources, "_class_files", swap_then_list)
    found = sources.scan_class_folders(root, skipped := [])
    assert found["a"] == [] and len(found["b"]) == 2
    assert "secret_name" not in json.dumps([found, skipped])


def _voc_annotations(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "img_0.xml").write_text("<annotation><filename>img_0.png</filename></annotation>")
    return folder


def test_it_names_a_linked_annotations_folder_and_never_looks_into_it(import_root):
    root = make_class_folders(import_root / "src", {"JPEGImages": 1})
    (root / "Annotations").symlink_to(_voc_annotations(import_root / "theirs" / "Annotations"))
    message = f"Annotations: {LINK_NOT_FOLLOWED}"
    with pytest.raises(LabelError, match=f"^{message}$"):
        detect_format(root)
    with pytest.raises(LabelError, match=f"^{message}$"):
        label_check(root, task="detection")
    with pytest.raises(ValidationError, match=message):
        propose_task(kind="folder", path=root)


def test_it_refuses_a_linked_class_file_instead_of_reading_another_format(import_root):
    root = make_class_folders(import_root / "src", {"images": 1, "labels": 1})
    assert detect_format(root) == "kitti"
    (import_root / "elsewhere.txt").write_text("cat\n")
    (root / "classes.txt").symlink_to(import_root / "elsewhere.txt")  # YOLO's class file, made a link
    with pytest.raises(LabelError, match=f"^classes.txt: {LINK_NOT_FOLLOWED}$"):  # neither YOLO nor KITTI
        detect_format(root)


def _swap_after_the_check(monkeypatch, source: Path, outside: Path) -> None:
    """The build's roots check passes, then the source folder becomes a link out of the roots
    before it is read: what reads it must resolve and check it in one step."""
    check = building._check_roots

    def check_then_swap(*args, **kwargs):
        check(*args, **kwargs)
        source.rename(source.with_name("moved-away"))
        source.symlink_to(outside, target_is_directory=True)

    monkeypatch.setattr(building, "_check_roots", check_then_swap)


@pytest.mark.django_db
def test_it_never_builds_a_classification_folder_swapped_for_a_link_after_the_check(
    owner, import_root, tmp_path, monkeypatch
):
    root = make_class_folders(import_root / "src", {"a": 2, "b": 2})
    outside = make_class_folders(tmp_path / "theirs", {"secret_x": 2, "secret_y": 2})
    _swap_after_the_check(monkeypatch, root, outside)
    dataset = _build(owner, kind="folder", source={"path": str(root)})
    assert dataset.status == "failed"
    assert "is not inside an allowed import folder" in dataset.error
    assert "secret" not in json.dumps(dataset.labels or [])


@pytest.mark.django_db
def test_it_never_reads_labels_from_a_folder_swapped_for_a_link_after_the_check(
    owner, import_root, tmp_path, monkeypatch
):
    root = write_kitti(import_root / "kitti", make_shapes(4))
    outside = write_kitti(tmp_path / "theirs", make_shapes(4, seed=1))
    _swap_after_the_check(monkeypatch, root, outside)
    dataset = _build(owner, kind="folder", source={"path": str(root)}, task="detection")
    assert dataset.status == "failed"
    assert "is not inside an allowed import folder" in dataset.error
