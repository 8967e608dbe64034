"""Scanning sources into a plan: class folders, text lists, and what is refused or skipped."""

from __future__ import annotations

import pytest

from datasets.sources import SourceError, SplitOptions, detect_kind, plan_folder, plan_text_lists
from tests.datasets.conftest import make_class_folders


def test_it_splits_per_class_after_a_seeded_shuffle(tmp_path):
    root = make_class_folders(tmp_path / "src", {"cats": 8, "dogs": 4})
    plan = plan_folder(root, SplitOptions(val_percent=25, test_percent=25, seed=7))
    assert plan.labels == ["cats", "dogs"]
    count = {s: [sum(1 for _, y in v if y == c) for c in (0, 1)] for s, v in plan.splits.items()}
    assert count == {"train": [4, 2], "val": [2, 1], "test": [2, 1]}
    again = plan_folder(root, SplitOptions(val_percent=25, test_percent=25, seed=7))
    assert again.splits == plan.splits


def test_it_flattens_nested_folders_and_keeps_unicode_names(tmp_path):
    root = make_class_folders(tmp_path / "src", {"chat été": 2, "犬": 2})
    make_class_folders(root / "chat été" / "deeper", {"x": 2})
    plan = plan_folder(root, SplitOptions(val_percent=0))
    assert plan.labels == ["chat été", "犬"]
    assert sum(1 for _, y in plan.splits["train"] if y == 0) == 4


def test_it_ignores_hidden_class_folders_and_loose_files_with_reasons(tmp_path):
    root = make_class_folders(tmp_path / "src", {"a": 2, "b": 2, ".git": 3})
    (root / "README.txt").write_text("hello")
    (root / "a" / ".DS_Store").write_bytes(b"\0")
    plan = plan_folder(root, SplitOptions(val_percent=0))
    assert plan.labels == ["a", "b"]
    reasons = {s["path"]: s["reason"] for s in plan.skipped}
    assert reasons[".git"] == "hidden folder or file is not a class"
    assert reasons["README.txt"] == "file outside any class folder"
    assert reasons["a/.DS_Store"] == "hidden file ignored"


def test_it_refuses_a_single_class(tmp_path):
    root = make_class_folders(tmp_path / "src", {"only": 5})
    with pytest.raises(SourceError, match="at least 2 classes.*'only'"):
        plan_folder(root, SplitOptions())


def test_it_drops_an_empty_class_with_a_reason(tmp_path):
    root = make_class_folders(tmp_path / "src", {"a": 3, "b": 3, "empty": 0})
    plan = plan_folder(root, SplitOptions())
    assert plan.labels == ["a", "b"]
    assert {"path": "empty", "reason": "class has 0 files, below the minimum of 2"} in plan.skipped


def test_it_refuses_val_folders_whose_classes_differ(tmp_path):
    train = make_class_folders(tmp_path / "train", {"a": 2, "b": 2})
    val = make_class_folders(tmp_path / "val", {"a": 1, "c": 1})
    with pytest.raises(SourceError, match="classes the training folder lacks: c"):
        plan_folder(train, SplitOptions(), val_folder=val)


def test_it_uses_separate_val_folders(tmp_path):
    train = make_class_folders(tmp_path / "train", {"a": 2, "b": 2})
    val = make_class_folders(tmp_path / "val", {"a": 1, "b": 1})
    plan = plan_folder(train, SplitOptions(val_percent=50), val_folder=val)
    assert len(plan.splits["train"]) == 4 and len(plan.splits["val"]) == 2


def test_it_reports_blank_malformed_and_out_of_range_list_lines(tmp_path):
    images = make_class_folders(tmp_path / "img", {"a": 3, "b": 3})
    (tmp_path / "labels.txt").write_text("a\nb\n")
    lines = [
        "a/img_0.png 0",
        "a/img_1.png 0",
        "",
        "a/img_2.png",
        "b/img_0.png 1",
        "b/img_1.png 7",
        "b/img_2.png one",
        "b/img 2 with spaces.png 1",
        "   ",
    ]
    (images / "b" / "img 2 with spaces.png").write_bytes((images / "b" / "img_0.png").read_bytes())
    (tmp_path / "train.txt").write_text("\n".join(lines) + "\n")
    plan = plan_text_lists(
        tmp_path / "train.txt", tmp_path / "labels.txt", SplitOptions(val_percent=0), image_folder=images
    )
    paths = sorted(p.split("/img/")[1] for p, _ in plan.splits["train"])
    assert paths == ["a/img_0.png", "a/img_1.png", "b/img 2 with spaces.png", "b/img_0.png"]
    reasons = {s["path"]: s["reason"] for s in plan.skipped}
    assert reasons["train.txt line 3"] == "blank line"
    assert "expected 'path label'" in reasons["train.txt line 4"] or "not an integer" in reasons["train.txt line 4"]
    assert reasons["train.txt line 6"] == "label 7 is out of range (0..1)"
    assert reasons["train.txt line 7"] == "label 'one' is not an integer"


def test_it_refuses_list_paths_outside_the_allowed_roots(tmp_path):
    (tmp_path / "labels.txt").write_text("a\nb\n")
    (tmp_path / "list.txt").write_text("/etc/passwd 0\n/etc/hosts 1\n")
    with pytest.raises(SourceError, match="fewer than 2 images"):
        plan_text_lists(tmp_path / "list.txt", tmp_path / "labels.txt", SplitOptions(), allowed_roots=[tmp_path])


def test_it_detects_the_kind_of_a_source(tmp_path):
    from tests.datasets.conftest import zip_folder

    folder = make_class_folders(tmp_path / "f", {"a": 1})
    assert detect_kind(folder) == "folder"
    assert detect_kind(zip_folder(folder, tmp_path / "photos.bin")) == "archive"
    (tmp_path / "list.txt").write_text("a 0\n")
    assert detect_kind(tmp_path / "list.txt") == "textlist"
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "data.mdb").write_bytes(b"")
    assert detect_kind(tmp_path / "db") == "lmdb"
    (tmp_path / "job" / "train_db").mkdir(parents=True)
    (tmp_path / "job" / "train_db" / "data.mdb").write_bytes(b"")
    assert detect_kind(tmp_path / "job") == "digits"


@pytest.mark.parametrize("bad", [".", "..", ".hidden"])
def test_it_refuses_dot_and_hidden_class_names_in_a_labels_file(tmp_path, bad):
    from datasets.sources import read_labels_file

    (tmp_path / "labels.txt").write_text(f"cat\n{bad}\n")
    with pytest.raises(SourceError, match=f"line 2: class name '{bad}' is not allowed"):
        read_labels_file(tmp_path / "labels.txt")


def test_it_never_makes_dot_or_dotdot_class_folders_from_an_archive(tmp_path):
    import io
    import tarfile

    from datasets.archives import ArchiveError, Caps, extract_archive

    archive = tmp_path / "dots.tar"
    with tarfile.open(archive, "w") as tf:
        for name in ("./a/1.png", "./b/./2.png", "./../c/3.png"):
            info = tarfile.TarInfo(name)
            info.size = 1
            tf.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(ArchiveError, match="'./../c/3.png': path contains '..'"):
        extract_archive(archive, tmp_path / "out", Caps(10**6, 100, 100.0))
