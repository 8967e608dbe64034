"""manage.py import_dataset: every kind of source, counts printed, bad input exits non-zero."""

from __future__ import annotations

import io

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from datasets.models import Dataset
from tests.datasets.conftest import make_class_folders, sklearn_digits_folders, tar_folder, zip_folder
from trainer.datum import encode_datum, write_datum_lmdb


def _run(*args) -> str:
    out = io.StringIO()
    call_command("import_dataset", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.mark.django_db
def test_it_imports_sklearn_digits_folders_and_prints_counts(owner, tmp_path):
    root = sklearn_digits_folders(tmp_path / "digits", per_class=8)
    out = _run(
        str(root),
        "--name",
        "digits",
        "--image-size",
        "8x8",
        "--channels",
        "1",
        "--owner",
        "alice",
        "--val-percent",
        "25",
        "--sync",
    )
    lines = out.splitlines()
    dataset = Dataset.objects.get(pk=int(lines[0]))
    assert dataset.status == "ready" and dataset.owner == owner
    assert lines[1] == f"dataset {dataset.pk} ready: 80 images, 10 classes, 8x8x1, 0 skipped"
    assert lines[2].split() == ["class", "train", "val"]
    assert lines[3].split() == ["0", "6", "2"]
    assert lines[-1].split() == ["total", "60", "20"]


@pytest.mark.django_db
def test_it_proposes_the_size_channels_and_name_from_the_images(owner, tmp_path):
    root = sklearn_digits_folders(tmp_path / "digits", per_class=4)
    archive = zip_folder(root, tmp_path / "digits.zip")
    err = io.StringIO()
    call_command("import_dataset", str(archive), "--owner", "alice", "--sync", stdout=io.StringIO(), stderr=err)
    dataset = Dataset.objects.get()
    assert (dataset.name, dataset.image_width, dataset.image_height, dataset.channels) == ("digits", 8, 8, 1)
    assert err.getvalue().startswith(
        "image size 8x8 proposed from 20 sampled images (20 of that size); 1 channel proposed from 20 sampled images"
    )
    # What the command line says wins over the proposal, and is said as given, not as proposed.
    err = io.StringIO()
    call_command("import_dataset", str(archive), "--owner", "alice", "--name", "big", "--image-size", "16x16",
                 "--sync", stdout=io.StringIO(), stderr=err)  # fmt: skip
    big = Dataset.objects.get(name="big")
    assert (big.image_width, big.image_height, big.channels) == (16, 16, 1)
    assert err.getvalue().startswith(
        "image size 16x16 as given by --image-size; 20 sampled images propose 8x8; "
        "1 channel proposed from 20 sampled images; --channels chooses otherwise"
    )


@pytest.mark.django_db
@pytest.mark.parametrize("packer", [zip_folder, tar_folder], ids=["zip", "tar.gz"])
def test_it_imports_an_archive(owner, tmp_path, packer):
    folder = make_class_folders(tmp_path / "pets", {"cat": 2, "dog": 3})
    archive = packer(folder, tmp_path / ("pets.zip" if packer is zip_folder else "pets.tgz"))
    out = _run(
        str(archive), "--name", "pets", "--owner", "alice", "--image-size", "6x6", "--val-percent", "0", "--sync"
    )
    assert "dataset" in out and out.splitlines()[-1].split() == ["total", "5"]
    assert Dataset.objects.get().kind == "archive"


@pytest.mark.django_db
def test_it_imports_a_text_list_with_separate_val_list(owner, tmp_path):
    images = make_class_folders(tmp_path / "img", {"a": 3, "b": 3})
    (tmp_path / "labels.txt").write_text("a\nb\n")
    (tmp_path / "train.txt").write_text("a/img_0.png 0\na/img_1.png 0\nb/img_0.png 1\nb/img_1.png 1\n")
    (tmp_path / "val.txt").write_text("a/img_2.png 0\nb/img_2.png 1\n")
    out = _run(
        str(tmp_path / "train.txt"),
        "--name",
        "list",
        "--owner",
        "alice",
        "--labels",
        str(tmp_path / "labels.txt"),
        "--image-folder",
        str(images),
        "--val",
        str(tmp_path / "val.txt"),
        "--image-size",
        "4x4",
        "--sync",
    )
    assert out.splitlines()[-1].split() == ["total", "4", "2"]


@pytest.mark.django_db
def test_it_imports_a_caffe_lmdb(owner, tmp_path):
    rng = np.random.default_rng(0)
    records = ((b"%d" % i, encode_datum(rng.integers(0, 255, (4, 4, 3), dtype=np.uint8), i % 2)) for i in range(6))
    write_datum_lmdb(tmp_path / "train_lmdb", records, map_size=1 << 20)
    out = _run(str(tmp_path / "train_lmdb"), "--name", "lmdb", "--owner", "alice", "--sync")
    assert "4x4x3" in out and out.splitlines()[-1].split() == ["total", "6"]
    assert Dataset.objects.get().labels == ["0", "1"]


@pytest.mark.django_db
def test_it_exits_non_zero_naming_the_problem(owner, tmp_path):
    with pytest.raises(CommandError, match="SOURCE: .*no such file or folder"):
        _run(str(tmp_path / "missing"), "--name", "x", "--owner", "alice")
    with pytest.raises(CommandError, match="--image-size: 'big'"):
        _run(str(tmp_path), "--name", "x", "--owner", "alice", "--image-size", "big")
    with pytest.raises(CommandError, match="--owner: no user named 'nobody'"):
        _run(str(tmp_path), "--name", "x", "--owner", "nobody")
    (tmp_path / "list.txt").write_text("a 0\n")
    with pytest.raises(CommandError, match="--labels: A text list needs a labels file"):
        _run(str(tmp_path / "list.txt"), "--name", "x", "--owner", "alice")
    make_class_folders(tmp_path / "one", {"only": 3})
    with pytest.raises(CommandError, match="SOURCE: one: a classifier needs at least 2 classes"):
        _run(str(tmp_path / "one"), "--name", "x", "--owner", "alice", "--sync")  # refused before any build


@pytest.mark.django_db
def test_it_prints_the_label_check_of_a_detection_archive(owner, tmp_path):
    from tests.support.shapes import make_shapes, write_kitti

    archive = zip_folder(write_kitti(tmp_path / "street", make_shapes(4)), tmp_path / "street.zip")
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "import_dataset", str(archive), "--owner", "alice", "--image-size", "16x16", "--sync", stdout=out, stderr=err
    )
    assert "detection labels in kitti format: 4 images" in err.getvalue()
    assert "  square: " in err.getvalue() and "  disc: " in err.getvalue()


def test_it_says_the_split_by_a_voc_source_s_own_lists_in_the_label_check(tmp_path):
    from datasets.labels import read_labels
    from datasets.labels.classes import class_preview
    from datasets.management.commands.import_dataset import label_check_text
    from tests.datasets.labels.test_splits import SHAPES, write_voc_masks_with_lists

    source = read_labels(write_voc_masks_with_lists(tmp_path / "voc", SHAPES), "voc_masks")
    text = label_check_text(class_preview(source, None))
    lists = "ImageSets/Segmentation/train.txt, ImageSets/Segmentation/val.txt"
    assert f"split by the source's own lists ({lists}): " in text
    assert "train 5, val 4; --val-percent, --test-percent and --seed are not used" in text
    assert "3 unlisted: image in none of the source's own split lists (ImageSets): left out" in text
