"""One size rule for every user image (datasets/images.py, check_image_size): sides, aspect ratio and
pixels, judged from the header, at every door that decodes a user's image."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from datasets.build import ImageOptions, process_chunk
from datasets.images import (
    ImageLimits,
    ImageRefused,
    check_image_size,
    image_limits,
    load_image,
    prepare_image,
    set_image_limits,
)
from datasets.labels.common import MaskFormat
from datasets.labels.files import LabelError
from datasets.labels.masks import load_mask
from datasets.preview import SourceError, _first_image
from trainer.datum import Datum, decode_datum
from workbench.inference import engine

# Under Pillow's pixel limit by far (40,000 pixels, 157 bytes), but a side of 40,000 and a ratio of
# 40,000 to 1: the shape of the 155 KB PNG of 1 x 80,000,000 pixels that cost the web 2.9 GB.
THIN = (1, 40_000)


@pytest.fixture(autouse=True)
def default_limits():
    """The defaults (16384 pixels a side, 20 to 1), whatever an earlier test left in this process."""
    previous = image_limits()
    set_image_limits(ImageLimits())
    yield
    set_image_limits(previous)


def _png(size: tuple[int, int], mode: str = "L") -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, size).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("size", "refused"),
    [
        ((16_384, 10), "ratio is over the limit of 20 to 1"),
        ((16_385, 1_000), "a side is over the limit of 16384 pixels"),
        ((1, 21), "ratio is over the limit of 20 to 1"),
        ((9_000, 9_000), "over the limit of 50000000 pixels"),
        ((1, 20), None),
        ((16_384, 820), None),
    ],
)
def test_it_judges_sides_ratio_and_pixels(size, refused):
    limits = ImageLimits(max_pixels=50_000_000, max_side=16_384, max_aspect=20)
    set_image_limits(limits)
    if refused is None:
        check_image_size(*size)
    else:
        with pytest.raises(ImageRefused, match=refused) as caught:
            check_image_size(*size)
        assert f"image is {size[0]} x {size[1]} pixels" in str(caught.value)


def _process_chunk(path: Path) -> None:
    [(_seq, value, reason)], _total, _n = process_chunk([(0, str(path), 0, True)], ImageOptions(8, 8, 1, "crop"))
    assert value is None
    raise ImageRefused(reason)


def _preview(path: Path) -> None:
    try:
        _first_image([("thin.png", path.read_bytes())], width=8, height=8, channels=1, resize_mode="crop")
    except SourceError as error:
        raise ImageRefused(str(error)) from None


def _classify_many(path: Path) -> None:
    good, [skipped] = engine._decode([path], path.parent)
    assert not good
    raise ImageRefused(skipped["reason"])


def _mask(path: Path) -> None:
    try:
        load_mask(path, MaskFormat(), "thin.png")
    except LabelError as error:
        raise ImageRefused(str(error)) from None


def _imported_lmdb_record(path: Path) -> None:
    value = Datum(channels=1, height=THIN[1], width=THIN[0], label=0, encoded=True, data=path.read_bytes())
    decode_datum(value.SerializeToString(), check_size=check_image_size)


def _imported_raw_record(path: Path) -> None:
    raw = Datum(channels=1, height=THIN[1], width=THIN[0], label=0, data=bytes(THIN[0] * THIN[1]))
    decode_datum(raw.SerializeToString(), check_size=check_image_size)


# Every door through which a user's image is decoded; each must refuse the thin image by the rule.
DOORS: list[tuple[str, Callable[[Path], object]]] = [
    ("load_image", load_image),
    ("dataset build: prepare_image", lambda p: prepare_image(p, width=8, height=8, channels=1, resize_mode="squash")),
    ("dataset build: a worker's chunk", _process_chunk),
    ("dataset preview", _preview),
    ("classify, detect, segment, look inside: one upload", lambda p: engine.open_image(p.read_bytes())),
    ("classify-many and test jobs", _classify_many),
    ("segmentation masks (label check, build)", _mask),
    ("imported LMDB: encoded record", _imported_lmdb_record),
    ("imported LMDB: raw record", _imported_raw_record),
]


@pytest.mark.parametrize(("door", "open_with"), DOORS, ids=[door for door, _ in DOORS])
def test_it_refuses_a_thin_image_by_its_sides_at_every_door(tmp_path, door, open_with):
    path = tmp_path / "thin.png"
    path.write_bytes(_png(THIN))
    with pytest.raises(ImageRefused) as caught:
        open_with(path)
    message = str(caught.value)
    assert "1 x 40000 pixels" in message and "16384" in message, f"{door}: {message}"
    assert str(tmp_path) not in message


def test_it_judges_the_header_before_decoding_a_pixel(tmp_path):
    # Cut after the header: a door that decoded first would report a truncated image instead.
    data = _png(THIN)
    header_only = data[: data.index(b"IDAT") + 4]
    with pytest.raises(ImageRefused, match="1 x 40000 pixels"):
        load_image(header_only)


def test_it_keeps_ordinary_photos(tmp_path):
    pixels = prepare_image(_png((4_000, 3_000), "RGB"), width=16, height=16, channels=3, resize_mode="crop")
    assert pixels.shape == (16, 16, 3) and isinstance(pixels, np.ndarray)
