"""Per-kind byte limits of label files (datasets/labels/limits.py): the table run row by row, each
row's kind written one byte over its limit on the fly and refused by name and limit, not parsed.
The one-GiB cap they replace let a gigabyte VOC, KITTI or YOLO file be parsed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from datasets.labels import read_labels
from datasets.labels.common import LabelError
from datasets.labels.limits import FILE_LIMITS
from tests.support import shapes as drawn

SHAPES = drawn.make_shapes(2)
FIRST = SHAPES[0].name
# COCO's row is a gigabyte (a whole set's labels): lowered for this test, as no test writes 1 GiB.
COCO_TEST_LIMIT = 1000


def _padded(path: Path, limit: int, prefix: bytes = b"", filler: bytes = b" ") -> None:
    """`path` rewritten as `prefix` padded with `filler` to one byte over `limit`."""
    size = limit + 1
    path.write_bytes(prefix + filler * ((size - len(prefix)) // len(filler) + 1))
    with open(path, "r+b") as handle:
        handle.truncate(size)


def _voc_masks_with_lists(root: Path, shapes) -> Path:
    drawn.write_voc_masks(root, shapes)
    (root / "ImageSets" / "Segmentation").mkdir(parents=True)
    (root / "ImageSets" / "Segmentation" / "train.txt").write_text(f"{FIRST}\n")
    return root


# (kind, format, writer, file made too large relative to the source, how it is refused:
# "refused" for the whole source, else the report's kind for that file).
ROWS = [
    ("voc_xml", "voc", drawn.write_voc, f"Annotations/{FIRST}.xml", "bad_file"),
    ("kitti_txt", "kitti", drawn.write_kitti, f"labels/{FIRST}.txt", "bad_file"),
    ("yolo_txt", "yolo", drawn.write_yolo, f"labels/{FIRST}.txt", "bad_file"),
    ("class_list", "yolo", drawn.write_yolo, "classes.txt", "refused"),
    ("class_list", "index_masks", drawn.write_index_masks, "labels.txt", "refused"),
    ("coco_json", "coco", drawn.write_coco, "annotations/instances_default.json", "refused"),
    ("mask", "index_masks", drawn.write_index_masks, f"masks/{FIRST}.png", "bad_mask"),
    ("split_list", "voc_masks", _voc_masks_with_lists, "ImageSets/Segmentation/train.txt", "refused"),
]


def test_it_has_a_row_for_every_kind_and_keeps_all_but_coco_far_below_a_gigabyte():
    assert {row[0] for row in ROWS} | {"data_yaml"} == set(FILE_LIMITS)  # data.yaml: tests/.../test_yolo.py
    assert all(row.max_bytes <= 32 << 20 for kind, row in FILE_LIMITS.items() if kind != "coco_json")


@pytest.mark.parametrize(("kind", "fmt", "writer", "name", "outcome"), ROWS, ids=[f"{r[0]}-{r[1]}" for r in ROWS])
def test_it_refuses_each_kind_of_label_file_over_its_limit_by_name_and_limit(
    tmp_path, monkeypatch, kind, fmt, writer, name, outcome
):
    if kind == "coco_json":
        monkeypatch.setitem(FILE_LIMITS, kind, dataclasses.replace(FILE_LIMITS[kind], max_bytes=COCO_TEST_LIMIT))
    row = FILE_LIMITS[kind]
    root = writer(tmp_path / fmt, SHAPES)
    original = (root / name).read_bytes()
    # The file stays what it was (a PNG's trailing bytes are not read by Pillow): only its size is wrong.
    _padded(root / name, row.max_bytes, original, b" " if outcome != "bad_mask" else b"\0")
    refusal = f"{name}: {row.max_bytes + 1} bytes, more than the {row.max_bytes} bytes"
    if outcome == "refused":
        with pytest.raises(LabelError) as refused:
            read_labels(root, fmt)
        assert str(refused.value).startswith(refusal) and str(refused.value).endswith(f"{row.what} may have")
        return
    source = read_labels(root, fmt)
    problems = [(p.file, p.kind, p.message) for p in source.report.problems]
    assert len(problems) == 1 and problems[0][:2] == (name, outcome), problems
    # A problem is said without its file's name: the problem's file names it, once.
    assert problems[0][2].startswith(refusal.removeprefix(f"{name}: ")) and row.what in problems[0][2]
    # The image of a refused label file is left out, not kept as an image without objects.
    assert [image.name for image in source.images] == [n for n in _image_names(source, fmt) if FIRST not in n]


def _image_names(source, fmt: str) -> list[str]:
    folder = "JPEGImages" if fmt == "voc" else "images"
    return [f"{folder}/{shape.name}.png" for shape in SHAPES]
