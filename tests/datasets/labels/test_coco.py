"""COCO's numbers (datasets/labels/coco.py): RLE decoded in linear time and bounded by its image,
and every bbox, polygon point and RLE count a finite number in range, refused by annotation and
field otherwise (they were 500s, CLI tracebacks and builds failing with "Internal error")."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from datasets.labels import read_labels

SIDE = 1000


def write_source(root: Path, annotations: list[dict]) -> Path:
    (root / "images").mkdir(parents=True)
    (root / "annotations").mkdir()
    Image.fromarray(np.zeros((SIDE, SIDE), dtype=np.uint8)).save(root / "images" / "a.png")
    data = {
        "images": [{"id": 1, "file_name": "a.png", "width": SIDE, "height": SIDE}],
        "categories": [{"id": 1, "name": "thing"}],
        "annotations": [{"id": n, "image_id": 1, "category_id": 1, **a} for n, a in enumerate(annotations, 1)],
    }
    # json.dumps writes NaN, Infinity and 400-digit integers as the hostile file had them.
    (root / "annotations" / "instances.json").write_text(json.dumps(data))
    return root


def rle(counts) -> dict:
    return {"segmentation": {"size": [SIDE, SIDE], "counts": counts}}


@pytest.mark.parametrize(
    "counts", ["o" * 1_000_000, "111" + "0" * (SIDE * SIDE - 3)], ids=["endless-number", "a-million-runs"]
)
def test_it_decodes_a_megabyte_of_rle_counts_within_a_small_cpu_budget(tmp_path, counts):
    source = write_source(tmp_path / "coco", [rle(counts)])
    started = time.process_time()
    read = read_labels(source, "coco_masks")
    # Generous for a busy machine: the quadratic decode took 26 s of CPU for 1 MB.
    assert time.process_time() - started < 5
    assert len(read.images) == 1


@pytest.mark.parametrize(
    "annotation, message",
    [
        ({"bbox": [0, 0, float("inf"), 5]}, "bbox[2] must be a finite number"),
        ({"bbox": [0, 10**400, 5, 5]}, "bbox[1] must be a number from"),
        ({"bbox": [float("nan"), 0, 5, 5]}, "bbox[0] must be a finite number"),
    ],
)
def test_it_names_a_box_number_that_is_not_finite_or_in_range(tmp_path, annotation, message):
    read = read_labels(write_source(tmp_path / "coco", [annotation]), "coco")
    assert [(p.file, p.kind) for p in read.report.problems] == [
        ("annotations/instances.json annotation 1", "malformed")
    ]
    assert message in read.report.problems[0].message


@pytest.mark.parametrize(
    "annotation, message",
    [
        ({"segmentation": [[0, 0, 10, float("nan"), 10, 10]]}, "polygon point must be a finite number"),
        ({"segmentation": [[0, 0, 10, 10**400, 10, 10]]}, "polygon point must be a number from"),
        (rle([float("inf"), 10]), "RLE counts must be a finite number"),
        (rle([10**400, 10]), "RLE counts must be a whole number from 0 to"),
        (rle([SIDE * SIDE + 1]), "RLE counts must be a whole number from 0 to"),
    ],
)
def test_it_names_a_mask_number_that_is_not_finite_or_in_range(tmp_path, annotation, message):
    read = read_labels(write_source(tmp_path / "coco", [annotation]), "coco_masks")
    assert [(p.file, p.kind) for p in read.report.problems] == [
        ("annotations/instances.json annotation 1", "malformed")
    ]
    assert message in read.report.problems[0].message
    assert read.images[0].shapes in ((), [])


@pytest.mark.parametrize(
    "category_id, shown", [("c" * 100_000, "'" + "c" * 40 + "...'"), ([7] * 100_000, "(a list)"), (5, "5")]
)
def test_it_shows_an_unknown_category_id_cut_to_a_line(tmp_path, category_id, shown):
    source = write_source(tmp_path / "coco", [{"bbox": [0, 0, 5, 5], "category_id": category_id}])
    (problem,) = read_labels(source, "coco").report.problems
    assert (problem.kind, problem.message) == ("unknown_class", f"category_id {shown} is not in categories")


def test_it_reports_an_image_name_no_file_can_have_as_missing_in_one_line(tmp_path):
    source = write_source(tmp_path / "coco", [])
    data = json.loads((source / "annotations" / "instances.json").read_text())
    data["images"][0]["file_name"] = "n" * 100_000 + ".png"
    (source / "annotations" / "instances.json").write_text(json.dumps(data))
    (problem,) = read_labels(source, "coco").report.problems
    assert problem.kind == "missing_image" and len(problem.message) < 160
