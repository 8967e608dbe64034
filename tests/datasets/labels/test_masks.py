"""Masks (datasets/labels/masks.py): an RGB mask's colours looked up vectorised and their number
bounded (a mask of a million colours is refused at once, by name), and a mask whose header claims
60000 x 60000 pixels refused by the image-size rule before a pixel is decoded, through the label
check and through a build."""

from __future__ import annotations

import io
import json
import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from PIL import Image

from datasets.labels import LabelError, read_labels
from datasets.labels.plan import label_check
from datasets.models import Dataset
from tests.support import shapes as drawn

SHAPES = drawn.make_shapes(2)
MASK = f"masks/{SHAPES[1].name}.png"  # not the first: detection opens the first mask


def test_it_maps_known_colours_to_their_class_and_unknown_ones_to_ignore(tmp_path):
    root = drawn.write_rgb_masks(tmp_path / "rgb", SHAPES)
    rgb = np.asarray(Image.open(root / MASK)).copy()
    rgb[0, :3] = [(1, 2, 3), (255, 0, 0), (0, 0, 255)]
    Image.fromarray(rgb).save(root / MASK)
    source = read_labels(root, "rgb_masks")
    assert [(p.file, p.kind) for p in source.report.problems] == [(MASK, "mask_values")]
    image = next(image for image in source.images if image.mask.endswith(MASK))
    assert image.present == frozenset({0, 1, 2})


def test_it_refuses_a_mask_of_a_million_colours_fast_and_by_name(tmp_path):
    root = drawn.write_rgb_masks(tmp_path / "rgb", SHAPES)
    side = 1024
    colours = np.arange(side * side, dtype=np.uint32).reshape(side, side)
    mask = np.stack([(colours >> 16) & 255, (colours >> 8) & 255, colours & 255], axis=-1).astype(np.uint8)
    Image.fromarray(mask).save(root / MASK, compress_level=1)
    Image.fromarray(np.zeros((side, side, 3), dtype=np.uint8)).save(root / "images" / f"{SHAPES[1].name}.png")
    started = time.process_time()
    source = read_labels(root, "rgb_masks")
    assert time.process_time() - started < 3  # generous for a busy machine: one block of colours is enough
    assert [(p.file, p.kind, p.message) for p in source.report.problems] == [
        (MASK, "bad_mask", "more than 1024 distinct colours; an RGB mask holds one colour per class (at most 256)")
    ]
    assert [image.name for image in source.images] == [f"images/{SHAPES[0].name}.png"]


def png_header_only(width: int, height: int) -> bytes:
    """A grey PNG whose header claims `width` x `height` with a body of a few bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    body = zlib.compress(b"\0" * 16)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def _hostile_source(folder: Path) -> Path:
    root = drawn.write_index_masks(folder, SHAPES)
    (root / MASK).write_bytes(png_header_only(60_000, 60_000))
    return root


def test_it_refuses_a_mask_whose_header_claims_60000_by_60000_in_the_label_check(import_root):
    root = _hostile_source(import_root / "masks")
    started = time.process_time()
    check = label_check(root, task="segmentation", fmt="index_masks")
    assert time.process_time() - started < 2  # nothing decoded
    problems = [(p["file"], p["kind"], p["message"]) for p in check["report"]["problems"]]
    assert len(problems) == 1 and problems[0][:2] == (MASK, "bad_mask"), problems
    assert "image is over the limit of" in problems[0][2] and "pixels" in problems[0][2]
    assert check["images"] == 1


@pytest.mark.django_db
def test_it_builds_without_a_mask_whose_header_claims_60000_by_60000_and_names_it(owner, import_root):
    root = _hostile_source(import_root / "masks")
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(
            "import_dataset", str(root), "--format", "index_masks", "--image-size", "24x18", "--val-percent", "0",
            "--owner", "alice", "--sync", stdout=out, stderr=err,
        )  # fmt: skip
    except CommandError as error:
        pytest.fail(f"the build failed: {error}")
    dataset = Dataset.objects.get(pk=int(out.getvalue().splitlines()[0]))
    assert dataset.status == "ready", dataset.error
    skipped = {s["path"]: s["reason"] for s in json.loads((dataset.path / "skipped.json").read_text())}
    assert list(skipped) == [MASK] and "image is over the limit of" in skipped[MASK]
    assert dataset.splits["train"]["count"] == 1


def test_it_detects_the_format_when_the_first_mask_claims_60000_by_60000(import_root):
    # Detection opens the first mask (by name) to tell index masks from colour ones: a hostile
    # header there must leave the report to the reader instead of ending the check in a crash.
    root = drawn.write_index_masks(import_root / "first", SHAPES)
    first = sorted((root / "masks").glob("*.png"))[0]
    first.write_bytes(png_header_only(60_000, 60_000))
    check = label_check(root, task="segmentation", fmt="auto")
    assert check["format"] == "index_masks"
    assert [p["kind"] for p in check["report"]["problems"]] == ["bad_mask"]


def test_it_numbers_a_colour_maps_lines_as_the_other_class_lists_do(tmp_path):
    # Only "\n" ends a line: splitlines() also split at U+2028, so this map read as three colours.
    root = drawn.write_rgb_masks(tmp_path / "rgb", SHAPES)
    (root / "labelmap.txt").unlink()
    (root / "labels.txt").write_text("\n".join(drawn.SEG_CLASSES) + "\n")
    (root / "colormap.txt").write_text("0,0,0\n255,0,0\u20280,0,255\n")
    with pytest.raises(LabelError, match=r"colormap\.txt line 2: .*three numbers"):
        read_labels(root, "rgb_masks")


def test_it_names_the_classes_no_mask_holds(tmp_path):
    # A VOC source without labelmap.txt takes VOC's 21 classes; a set that draws 3 gave 18 more
    # outputs to the network, and the check said "No label problems" without a word about them.
    source = drawn.write_voc_masks(tmp_path / "voc", drawn.make_shapes(4), labelmap=False)
    check = label_check(source, task="segmentation", fmt="voc_masks")
    assert len(check["labels"]) == 21 and len(check["empty_classes"]) == 21 - len(drawn.SEG_CLASSES)
    assert "background" not in check["empty_classes"] and "bird" in check["empty_classes"]
