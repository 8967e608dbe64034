"""Detection and segmentation targets as Caffe Datum records: the second LMDB of a split
(`<split>_targets_db`, the images' keys), written by the datasets app and read by the trainer.
The layout is in docs/formats.md ("Detection and segmentation datasets").

- detection: `float_data` N x 6 = class, x1, y1, x2, y2, ignore (stored image pixels);
- segmentation: an encoded PNG, one grey byte per pixel = class index, IGNORE_INDEX = ignore.
"""

from __future__ import annotations

import io

import numpy as np
from google.protobuf.message import DecodeError
from PIL import Image

from trainer.datum import Datum, DatumError

BOX_FIELDS = ("class", "x1", "y1", "x2", "y2", "ignore")


def encode_boxes(boxes: np.ndarray) -> bytes:
    """N x 6 (class, x1, y1, x2, y2, ignore) -> a Datum (N may be 0: an image without objects)."""
    boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, len(BOX_FIELDS))
    if not np.isfinite(boxes).all():
        raise DatumError("boxes hold NaN or infinity")
    datum = Datum(channels=1, height=len(boxes), width=len(BOX_FIELDS), label=-1)
    datum.float_data.extend(boxes.ravel().tolist())
    return datum.SerializeToString()


def decode_boxes(value: bytes, *, where: str = "record") -> np.ndarray:
    """A detection target Datum -> float32 N x 6."""
    datum = _parse(value, where)
    if datum.width != len(BOX_FIELDS) or len(datum.float_data) != datum.height * datum.width:
        raise DatumError(f"{where}: not a box record ({datum.height} x {datum.width}, {len(datum.float_data)} floats)")
    return np.asarray(datum.float_data, dtype=np.float32).reshape(datum.height, len(BOX_FIELDS))


def encode_mask(mask: np.ndarray) -> bytes:
    """H x W uint8 class indexes -> a Datum holding it as a PNG."""
    mask = np.asarray(mask)
    if mask.dtype != np.uint8 or mask.ndim != 2:
        raise DatumError(f"a mask must be H x W uint8, got {mask.dtype} {mask.shape}")
    buffer = io.BytesIO()
    Image.fromarray(mask, mode="L").save(buffer, format="PNG")
    height, width = mask.shape
    return Datum(
        channels=1, height=height, width=width, label=-1, encoded=True, data=buffer.getvalue()
    ).SerializeToString()


def decode_mask(value: bytes, *, where: str = "record") -> np.ndarray:
    """A segmentation target Datum -> H x W uint8 class indexes."""
    datum = _parse(value, where)
    if not datum.encoded or not datum.data:
        raise DatumError(f"{where}: not a mask record (no encoded image)")
    try:
        with Image.open(io.BytesIO(datum.data)) as image:
            if image.mode not in ("L", "P"):
                raise DatumError(f"{where}: a mask must be a grey or paletted PNG, got mode {image.mode}")
            mask = np.array(image, dtype=np.uint8)
    except (OSError, SyntaxError, ValueError) as exc:
        raise DatumError(f"{where}: mask cannot be decoded ({exc})") from None
    if (datum.height, datum.width) != mask.shape:
        raise DatumError(f"{where}: header says {datum.height}x{datum.width} but the mask is {mask.shape}")
    return mask


def _parse(value: bytes, where: str) -> Datum:
    datum = Datum()
    try:
        datum.ParseFromString(bytes(value))
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise DatumError(f"{where}: not a Caffe Datum ({exc})") from None
    return datum
