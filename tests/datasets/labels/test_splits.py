"""The split of a label source: its own lists where it has them (VOC's ImageSets, used and said),
else the images' names and the seed alone, whatever the format (datasets/labels/splits.py, plan.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from datasets.labels import read_labels
from datasets.labels.classes import class_preview
from datasets.labels.plan import plan_annotated
from tests.support import shapes as drawn

SHAPES = drawn.make_shapes(12)


def write_voc_masks_with_lists(root: Path, shapes) -> Path:
    """VOC's masks with its own split: the first 5 images train, the next 4 val, the rest in no list."""
    drawn.write_voc_masks(root, shapes)
    lists = root / "ImageSets" / "Segmentation"
    lists.mkdir(parents=True)
    (lists / "train.txt").write_text("".join(f"{s.name}\n" for s in shapes[:5]))
    (lists / "val.txt").write_text("".join(f"{s.name}\n" for s in shapes[5:9]))
    return root


def _split_names(plan) -> dict[str, list[str]]:
    return {split: sorted(Path(path).stem for path, _, _ in entries) for split, entries in plan.splits.items()}


def test_it_splits_a_voc_source_by_its_own_image_set_lists_and_says_so(tmp_path):
    source = read_labels(write_voc_masks_with_lists(tmp_path / "voc", SHAPES), "voc_masks")
    plan = plan_annotated(source, class_map=None, val_percent=50, test_percent=20, seed=3)
    assert _split_names(plan) == {
        "train": sorted(s.name for s in SHAPES[:5]),
        "val": sorted(s.name for s in SHAPES[5:9]),
    }
    check = class_preview(source, None)
    assert check["own_split"] == {
        "lists": ["ImageSets/Segmentation/train.txt", "ImageSets/Segmentation/val.txt"],
        "counts": {"train": 5, "val": 4},
    }
    # The images no list names are left out by name, and the build's skipped report names them.
    assert check["report"]["counts"]["unlisted"] == 3
    assert sorted(p["path"] for p in plan.skipped) == sorted(f"JPEGImages/{s.name}.png" for s in SHAPES[9:])


def test_it_splits_by_the_percentages_where_the_source_has_no_lists(tmp_path):
    source = read_labels(drawn.write_voc_masks(tmp_path / "voc", SHAPES), "voc_masks")
    assert class_preview(source, None)["own_split"] is None
    plan = plan_annotated(source, class_map=None, val_percent=25, test_percent=0, seed=3)
    assert {split: len(entries) for split, entries in plan.splits.items()} == {"train": 9, "val": 3}


@pytest.mark.parametrize("seed", [0, 7])
def test_it_splits_the_same_images_alike_in_every_detection_format(tmp_path, seed):
    splits = {}
    for fmt, writer in (
        ("kitti", drawn.write_kitti),
        ("yolo", drawn.write_yolo),
        ("coco", drawn.write_coco),
        ("voc", drawn.write_voc),
    ):
        # COCO's JSON lists its images in its own order (here reversed), the others' folders by name.
        shapes = SHAPES[::-1] if fmt == "coco" else SHAPES
        source = read_labels(writer(tmp_path / fmt, shapes), fmt)
        splits[fmt] = _split_names(plan_annotated(source, class_map=None, val_percent=25, test_percent=25, seed=seed))
    assert splits["coco"] == splits["kitti"] == splits["yolo"] == splits["voc"], splits


@pytest.mark.parametrize("seed", range(8))
def test_it_holds_out_every_class_that_two_images_hold(tmp_path, seed):
    # A cut of the shuffled images left a small detection set's rarer class out of validation
    # (the new user's walk: Pedestrian 10 train, 0 val), and its AP was never measured.
    shapes = drawn.make_shapes(10)
    source = read_labels(drawn.write_kitti(tmp_path / "kitti", shapes), "kitti")
    plan = plan_annotated(source, class_map=None, val_percent=20, test_percent=10, seed=seed)
    held = {split: {int(c) for _, _, boxes in entries for c in boxes[:, 0]} for split, entries in plan.splits.items()}
    assert held["val"] == held["train"] == set(range(len(plan.labels))), held
    assert {split: len(entries) for split, entries in plan.splits.items()} == {"test": 1, "val": 2, "train": 7}
