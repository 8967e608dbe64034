"""One hostile source per label format: each problem is named by file and line (or entry) and the
rest is read; what cannot be read at all is refused with the file named."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from PIL import Image

from datasets.labels import detect_format, detect_format_in_names, read_labels
from datasets.labels.classes import class_preview
from datasets.labels.common import LabelError
from datasets.labels.limits import FILE_LIMITS
from datasets.labels.plan import plan_annotated
from datasets.preview import archive_member_names
from tests.datasets.conftest import make_class_folders, tar_folder, zip_folder
from tests.support import shapes as drawn

SHAPES = drawn.make_shapes(4)


def _problems(source) -> list[tuple[str, int | None, str]]:
    return [(p.file, p.line, p.kind) for p in source.report.problems]


def test_it_names_each_bad_kitti_line_and_keeps_dontcare_as_an_ignore_region(tmp_path):
    root = drawn.write_kitti(tmp_path / "kitti", SHAPES)
    name = SHAPES[0].name
    rest = "1.5 1.6 3.9 0 1 10 0"
    (root / "labels" / f"{name}.txt").write_text(
        f"square 0 0 0 1 2 11 12 {rest}\n"  # fine
        "square 0 0 0 1 2\n"  # malformed: 6 columns
        f"square 0 0 0 left 2 11 12 {rest}\n"  # malformed: not a number
        f"disc 0 0 0 40 30 60 50 {rest}\n"  # reaches outside the 48x36 image: clipped
        f"disc 0 0 0 60 40 70 50 {rest}\n"  # wholly outside
        f"disc 0 0 0 5 5 5 9 {rest}\n"  # zero area
        f"DontCare -1 -1 -10 2 2 8 8 {rest}\n"
    )
    (root / "labels" / "lost.txt").write_text(f"square 0 0 0 1 2 11 12 {rest}\n")
    source = read_labels(root, "kitti")
    label_file = f"labels/{name}.txt"
    assert _problems(source) == [
        ("labels/lost.txt", None, "missing_image"),
        (label_file, 2, "malformed"),
        (label_file, 3, "malformed"),
        (label_file, 4, "outside"),
        (label_file, 5, "outside"),
        (label_file, 6, "zero_area"),
    ]
    image = next(i for i in source.images if i.name == f"images/{name}.png")
    assert [(b.class_name, b.x1, b.y1, b.x2, b.y2, b.ignore) for b in image.boxes] == [
        ("square", 1, 2, 11, 12, False),
        ("disc", 40, 30, 48, 36, False),
        (None, 2, 2, 8, 8, True),
    ]


def test_it_makes_boxes_under_the_minimum_size_ignore_regions(tmp_path):
    root = drawn.write_kitti(tmp_path / "kitti", SHAPES)
    source = read_labels(root, "kitti", min_box_size=100)
    assert source.report.counts == {"small": sum(len(s.boxes) for s in SHAPES)}
    assert all(b.ignore for i in source.images for b in i.boxes)


def test_it_names_a_broken_voc_xml_by_line_and_keeps_difficult_objects_as_ignore(tmp_path):
    root = drawn.write_voc(tmp_path / "voc", SHAPES)
    (root / "Annotations" / "broken.xml").write_text("<annotation>\n<object>\n<name>square</oops>\n")
    first = root / "Annotations" / f"{SHAPES[0].name}.xml"
    first.write_text(first.read_text().replace("<difficult>0</difficult>", "<difficult>1</difficult>", 1))
    (root / "Annotations" / "nowhere.xml").write_text("<annotation><filename>nowhere.jpg</filename></annotation>")
    source = read_labels(root, detect_format(root))
    assert _problems(source) == [
        ("Annotations/broken.xml", 3, "malformed"),
        ("Annotations/nowhere.xml", None, "missing_image"),
    ]
    first_image = next(i for i in source.images if SHAPES[0].name in i.name)
    assert first_image.boxes[0].ignore and not any(b.ignore for b in first_image.boxes[1:])


def test_it_refuses_a_huge_or_deeply_nested_coco_json_and_names_unknown_categories(tmp_path, monkeypatch):
    root = drawn.write_coco(tmp_path / "coco", SHAPES)
    path = root / "annotations" / "instances_default.json"
    data = json.loads(path.read_text())
    data["annotations"][0]["category_id"] = 99
    data["annotations"][1]["bbox"] = [1, 2, "wide"]
    data["images"].append({"id": 50, "file_name": "gone.png"})
    path.write_text(json.dumps(data))
    source = read_labels(root, "coco")
    assert _problems(source) == [
        ("annotations/instances_default.json image 5", None, "missing_image"),
        ("annotations/instances_default.json annotation 1", None, "unknown_class"),
        ("annotations/instances_default.json annotation 2", None, "malformed"),
    ]
    coco_row = dataclasses.replace(FILE_LIMITS["coco_json"], max_bytes=100)
    monkeypatch.setitem(FILE_LIMITS, "coco_json", coco_row)  # the size cap, lowered: no GB file in a test
    with pytest.raises(LabelError, match=r"annotations/instances_default.json: \d+ bytes, more than the 100 "):
        read_labels(root, "coco")
    monkeypatch.undo()
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(LabelError, match="annotations/instances_default.json: nested too deeply"):
        read_labels(root, "coco")
    path.write_text('{"images": [')
    with pytest.raises(LabelError, match="annotations/instances_default.json line 1: not valid JSON"):
        read_labels(root, "coco")


def test_it_names_yolo_lines_with_an_unknown_class_or_the_wrong_columns(tmp_path):
    root = drawn.write_yolo(tmp_path / "yolo", SHAPES)
    name = SHAPES[1].name
    (root / "labels" / f"{name}.txt").write_text(
        "0 0.5 0.5 0.2 0.2\n7 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2\n1 1.4 0.5 0.2 0.2\n"
    )
    source = read_labels(root, detect_format(root))
    assert source.format == "yolo" and source.classes == list(drawn.CLASSES)
    assert _problems(source) == [
        (f"labels/{name}.txt", 2, "unknown_class"),
        (f"labels/{name}.txt", 3, "malformed"),
        (f"labels/{name}.txt", 4, "outside"),
    ]
    (root / "classes.txt").unlink()
    (root / "data.yaml").write_text("names: {0: square, 2: disc}\n")
    with pytest.raises(LabelError, match="data.yaml: names must map the ids 0, 1, 2"):
        read_labels(root, "yolo")


def test_it_reads_mask_values_outside_the_palette_as_ignore_and_names_unusable_masks(tmp_path):
    root = drawn.write_voc_masks(tmp_path / "voc", SHAPES)
    masks = root / "SegmentationClass"
    bad_palette = SHAPES[0].mask.copy()
    bad_palette[0, :4] = 7  # the labelmap names 3 classes
    drawn.voc_palette_image(bad_palette).save(masks / f"{SHAPES[0].name}.png")
    Image.new("P", (5, 5)).save(masks / f"{SHAPES[1].name}.png")  # not the image's size
    Image.new("RGB", (48, 36)).save(masks / f"{SHAPES[2].name}.png")  # RGB where an index is expected
    (masks / f"{SHAPES[3].name}.png").unlink()
    source = read_labels(root, detect_format(root))
    found = [(f, kind) for f, _, kind in _problems(source)]
    assert found == [
        (f"SegmentationClass/{SHAPES[0].name}.png", "mask_values"),
        (f"SegmentationClass/{SHAPES[1].name}.png", "bad_mask"),
        (f"JPEGImages/{SHAPES[3].name}.png", "missing_mask"),
    ]
    assert "values 7 are not one of the 3 classes: read as ignore (255)" in source.report.problems[0].message
    assert "mask is 5x5 but its image is 48x36" in source.report.problems[1].message
    # The RGB mask is read through VOC's colours (a black image is all background).
    assert [i.name for i in source.images] == [f"JPEGImages/{s.name}.png" for s in SHAPES[:1] + SHAPES[2:3]]


def test_it_names_rgb_mask_colours_missing_from_the_colour_map(tmp_path):
    root = drawn.write_rgb_masks(tmp_path / "rgb", SHAPES)
    rgb = np.asarray(Image.open(root / "masks" / f"{SHAPES[0].name}.png")).copy()
    rgb[0, 0] = (1, 2, 3)
    Image.fromarray(rgb).save(root / "masks" / f"{SHAPES[0].name}.png")
    source = read_labels(root, detect_format(root))
    assert source.format == "rgb_masks"
    assert _problems(source) == [(f"masks/{SHAPES[0].name}.png", None, "mask_values")]
    (root / "labelmap.txt").write_text("background:0,0,0::\nsquare:300,0,0::\n")
    with pytest.raises(LabelError, match=r"labelmap.txt line 2: colour '300,0,0' is not r,g,b"):
        read_labels(root, "rgb_masks")


def test_it_shows_each_class_count_before_the_build_and_applies_renames_merges_and_ignores(tmp_path):
    root = drawn.write_kitti(tmp_path / "kitti", SHAPES)
    source = read_labels(root, "kitti")
    preview = class_preview(source, {"square": "box", "disc": None})
    assert preview["classes"] == [
        {"name": "disc", "count": 2, "maps_to": None},
        {"name": "square", "count": 4, "maps_to": "box"},
    ]
    assert preview["labels"] == [{"name": "box", "count": 4}]
    plan = plan_annotated(source, class_map={"square": "box", "disc": None}, val_percent=0, test_percent=0)
    boxes = np.concatenate([target for _, _, target in plan.splits["train"]])
    assert plan.labels == ["box"]
    assert sorted(boxes[:, 5].tolist()) == [0] * 4 + [1] * 2  # the ignored discs: ignore regions
    with pytest.raises(LabelError, match="every class is ignored"):
        class_preview(source, {"square": "", "disc": None})


def test_it_names_coco_masks_that_are_not_polygons_or_an_rle_covering_the_image(tmp_path):
    root = drawn.write_coco_masks(tmp_path / "coco", SHAPES)
    path = root / "annotations" / "instances_default.json"
    data = json.loads(path.read_text())
    data["annotations"][0]["segmentation"] = [[1, 2, 3]]  # not three points
    data["annotations"][1]["segmentation"] = {"counts": [5, 5], "size": [36, 48]}  # 10 of 1728 pixels
    data["annotations"][2]["segmentation"] = {"counts": "!!!~", "size": [36, 48]}
    data["annotations"][3]["iscrowd"] = 1
    path.write_text(json.dumps(data))
    source = read_labels(root, "coco_masks")
    assert source.classes == ["background", "square", "disc"]
    assert _problems(source) == [
        ("annotations/instances_default.json annotation 1", None, "malformed"),
        ("annotations/instances_default.json annotation 2", None, "malformed"),
        ("annotations/instances_default.json annotation 3", None, "malformed"),
    ]
    crowd = next(i for i in source.images if any(shape[0] == 255 for shape in i.shapes))
    assert crowd.name == f"images/{SHAPES[2].name}.png"


@pytest.mark.parametrize(
    ("writer", "fmt"),
    [
        (drawn.write_kitti, "kitti"),
        (drawn.write_voc, "voc"),
        (drawn.write_coco, "coco"),
        (drawn.write_yolo, "yolo"),
        (drawn.write_voc_masks, "voc_masks"),
        (drawn.write_index_masks, "index_masks"),
    ],
)
def test_it_detects_the_format_from_a_folder_and_from_an_archives_member_names(tmp_path, writer, fmt):
    folder = writer(tmp_path / "shapes", SHAPES[:2])
    assert detect_format(folder) == fmt
    for archive in (zip_folder(folder, tmp_path / "shapes.zip"), tar_folder(folder, tmp_path / "shapes.tar.gz")):
        assert detect_format_in_names(archive_member_names(archive)) == fmt  # through the wrapper folder


def test_it_detects_no_label_format_in_class_folders(tmp_path):
    folder = make_class_folders(tmp_path / "fruit", {"apple": 2, "kiwi": 2})
    assert detect_format(folder) is None
    assert detect_format_in_names(archive_member_names(zip_folder(folder, tmp_path / "fruit.zip"))) is None
