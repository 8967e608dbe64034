"""Detection and segmentation sources through the real import (manage.py import_dataset --sync:
the form, dataset_create, the build): every format's drawn shapes come back from the stored
targets as the boxes and masks drawn, scaled with their image."""

from __future__ import annotations

import base64
import io
import json
from collections import Counter

import lmdb
import numpy as np
import pytest
from django.core.management import CommandError, call_command
from PIL import Image

from datasets.gallery import class_colour, gallery_page
from datasets.models import Dataset
from tests.datasets.conftest import zip_folder
from tests.support import shapes as drawn
from trainer.dataset_folder import load_dataset_folder
from trainer.datum import decode_datum
from trainer.targets import decode_boxes, decode_mask

WRITERS = drawn.WRITERS
SHAPES = drawn.make_shapes(12)


def _import(*args) -> tuple[Dataset, str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_dataset", *args, "--owner", "alice", "--sync", stdout=out, stderr=err)
    return Dataset.objects.get(pk=int(out.getvalue().splitlines()[0])), out.getvalue(), err.getvalue()


def _records(db_path) -> list[bytes]:
    env = lmdb.open(str(db_path), readonly=True, lock=False)
    try:
        with env.begin() as txn:
            return [value for _, value in txn.cursor()]
    finally:
        env.close()


def _box_key(boxes: np.ndarray) -> tuple:
    return tuple(sorted(tuple(np.round(row, 2).tolist()) for row in boxes))


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", list(WRITERS))
def test_it_imports_each_format_and_stores_the_drawn_boxes_or_masks_scaled(owner, import_root, fmt):
    source = WRITERS[fmt](import_root / fmt, SHAPES)
    task = ["--task", "segmentation"] if fmt == "coco_masks" else []  # else the same JSON reads as boxes
    dataset, out, err = _import(str(source), "--image-size", "24x18", "--channels", "3", *task)
    assert dataset.status == "ready", dataset.error
    assert dataset.source["format"] == fmt  # detected from what the folder holds
    info = load_dataset_folder(dataset.path)
    assert info.task == dataset.task and dataset.task in ("detection", "segmentation")
    assert f"labels in {fmt} format: 12 images" in err
    stored = Counter()
    for split in info.splits.values():
        images, targets = _records(split.db), _records(split.targets_db)
        assert len(images) == len(targets) == split.count
        for value in images:
            chw, label = decode_datum(value)
            assert chw.shape == (3, 18, 24) and label == -1
        for value in targets:
            if info.task == "detection":
                stored[_box_key(decode_boxes(value))] += 1
            else:
                stored[decode_mask(value).tobytes()] += 1
    if info.task == "detection":
        assert sorted(info.labels) == ["disc", "square"]
        expected = Counter(_box_key(drawn.scaled_boxes(s, 24, 18, info.labels)) for s in SHAPES)
        # Instances per class, over the splits: 12 squares and 6 discs were drawn.
        totals = {row["name"]: row["total"] for row in dataset.class_counts()}
        assert totals == {"square": 12, "disc": 6}
    else:
        assert info.labels == list(drawn.SEG_CLASSES)
        expected = Counter(drawn.scaled_mask(s, 24, 18).tobytes() for s in SHAPES)
        totals = {row["name"]: row["total"] for row in dataset.class_counts()}
        assert totals == {"background": 12, "square": 12, "disc": 6}  # images holding the class
    assert stored == expected
    stats = json.loads((dataset.path / "label_stats.json").read_text())
    assert stats["images"] == 12 and stats["task"] == info.task


@pytest.mark.django_db
def test_it_builds_a_kitti_zip_with_the_class_table_applied_and_fill_moving_the_boxes(owner, import_root, tmp_path):
    source = drawn.write_kitti(import_root / "kitti", SHAPES)
    archive = zip_folder(source, import_root / "kitti.zip")
    class_map = json.dumps({"disc": "shape", "square": "shape"})  # merged into one class
    dataset, _, _ = _import(
        str(archive), "--task", "detection", "--image-size", "24x24", "--resize-mode", "fill", "--class-map", class_map
    )
    assert dataset.status == "ready", dataset.error
    assert dataset.labels == ["shape"]
    assert dataset.source["format"] == "kitti"  # detected in the extracted archive, and said
    assert dataset.class_counts()[0]["total"] == 18
    info = load_dataset_folder(dataset.path)
    # 48x36 into 24x24 by fill: scaled by 1/2 to 24x18, then 3 rows of noise above (and below).
    expected = Counter(
        _box_key(np.array([(0, x1 / 2, y1 / 2 + 3, x2 / 2, y2 / 2 + 3, 0) for _, x1, y1, x2, y2 in s.boxes]))
        for s in SHAPES
    )
    stored = Counter(_box_key(decode_boxes(v)) for split in info.splits.values() for v in _records(split.targets_db))
    assert stored == expected
    # The gallery draws each box in its class's colour and names the classes an image holds.
    page = gallery_page(dataset.path, "train")
    first = decode_boxes(_records(info.splits["train"].targets_db)[0])
    thumbnail = np.asarray(Image.open(io.BytesIO(base64.b64decode(page["items"][0]["src"].split(",", 1)[1]))))
    assert page["items"][0]["classes"] == [0] and thumbnail.shape == (24, 24, 3)
    x1, y1 = int(first[0, 1]), int(first[0, 2])
    assert tuple(thumbnail[y1, x1]) == class_colour(0)


@pytest.mark.django_db
def test_it_reads_an_archives_colour_masks_as_colour_when_nothing_names_the_format(owner, import_root):
    # An archive's names cannot tell colour masks from index masks; its masks/ was proposed as
    # index masks and the build read the colours as class numbers. Now the task is proposed and
    # the format left to the build, which looks inside the extracted masks.
    archive = zip_folder(drawn.write_rgb_masks(import_root / "colours", SHAPES), import_root / "colours.zip")
    dataset, _, err = _import(str(archive), "--image-size", "24x18")
    assert dataset.status == "ready", dataset.error
    assert (dataset.task, dataset.source["format"]) == ("segmentation", "rgb_masks")
    assert load_dataset_folder(dataset.path).labels == list(drawn.SEG_CLASSES)


@pytest.mark.django_db
def test_it_refuses_crop_and_a_class_table_naming_a_class_the_source_lacks(owner, import_root):
    source = drawn.write_voc(import_root / "voc", SHAPES[:4])
    with pytest.raises(CommandError, match=r"--resize-mode: crop would cut objects out of the image"):
        _import(str(source), "--resize-mode", "crop")
    with pytest.raises(CommandError, match=r"--format: class table: 'lorry' not among the source's classes"):
        _import(str(source), "--class-map", '{"lorry": "car"}')
    with pytest.raises(CommandError, match=r"--format: voc_masks holds segmentation labels, not detection"):
        _import(str(source), "--task", "detection", "--format", "voc_masks")
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_it_builds_what_is_usable_and_names_what_was_skipped(owner_client, import_root):
    source = drawn.write_kitti(import_root / "kitti", SHAPES[:6])
    (source / "labels" / "orphan.txt").write_text("square 0 0 0 1 1 5 5 1 1 1 0 0 0 0\n")
    (source / "labels" / f"{SHAPES[0].name}.txt").write_text("square 0 0 0 1 1\nsquare 0 0 0 2 2 30 30 1 1 1 0 0 0 0\n")
    dataset, _, err = _import(str(source), "--image-size", "24x18")
    assert dataset.status == "ready"
    assert "labels/orphan.txt: no image orphan.* in images/" in err
    assert f"labels/{SHAPES[0].name}.txt line 1: 6 columns; a KITTI line has 15" in err
    skipped = json.loads((dataset.path / "skipped.json").read_text())
    assert [s["path"] for s in skipped] == ["labels/orphan.txt"]
    report = json.loads((dataset.path / "label_report.json").read_text())
    assert report["report"]["counts"] == {"malformed": 1, "missing_image": 1}
    page = owner_client.get(f"/datasets/{dataset.pk}/").content.decode()
    assert "<h2>Objects per class</h2>" in page and 'id="label-check"' in page
    assert "6 columns; a KITTI line has 15 (16 with a score)" in page and "1 malformed: line or entry" in page


@pytest.mark.django_db
def test_it_keeps_digits_train_and_val_folders_as_the_splits(owner, import_root):
    root = import_root / "digits_kitti"
    drawn.write_kitti(root / "train", SHAPES[:8])
    drawn.write_kitti(root / "val", SHAPES[8:])
    (root / "val" / "labels" / "lost.txt").write_text("square 0 0 0 1 2\n")
    archive = zip_folder(root, import_root / "digits_kitti.zip")
    for source in (root, archive):
        dataset, _, _ = _import(str(source), "--image-size", "24x18", "--val-percent", "50")
        assert dataset.status == "ready", dataset.error
        assert (dataset.task, dataset.source["format"]) == ("detection", "kitti")
        assert {split: info["count"] for split, info in dataset.splits.items()} == {"train": 8, "val": 4}
        report = json.loads((dataset.path / "label_report.json").read_text())["report"]
        assert report["problems"][0]["file"] == "val/labels/lost.txt"
