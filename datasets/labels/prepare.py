"""The build worker's side of detection and segmentation: one image and its target, resized
together (squash or fill), the target encoded by trainer/targets.py.

No Django here: build worker processes import this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
from PIL import Image, ImageDraw

from datasets.images import ImageRefused, _as_hwc, convert_image, fit_geometry, load_image, resize_image
from datasets.labels.common import LabelError, MaskFormat
from datasets.labels.files import file_size, open_file
from datasets.labels.masks import load_mask
from datasets.names import os_error_text
from trainer.protocol import IGNORE_INDEX
from trainer.targets import encode_boxes, encode_mask


@dataclass(frozen=True)
class MaskTarget:
    """A segmentation target to build: the mask file, how it holds classes, and `lookup` (256
    bytes: source class index -> dataset class index or IGNORE_INDEX, the class table applied)."""

    path: str | None
    mask_format: MaskFormat
    lookup: bytes
    shapes: tuple = ()  # COCO masks: (source class index, "polygons" | "rle", data), drawn in order
    size: tuple[int, int] = (0, 0)  # COCO masks: the image's width and height


@dataclass(frozen=True)
class TargetFacts:
    """What the writer counts from one built target (it never decodes the target again).
    Detection: `classes` one entry per box that is not ignored, `boxes` their (width, height,
    centre x, centre y) in the stored image; segmentation: `classes` the classes present, `areas` their pixel counts."""

    classes: tuple[int, ...]
    boxes: tuple[tuple[float, float, float, float], ...] = ()
    areas: tuple[int, ...] = ()
    objects: int = 0


def open_image(path: str) -> BinaryIO:
    """A user's image opened by a build worker, every task alike: `path` (absolute, made by a plan
    from a resolved root) is opened again without following a link anywhere on its way
    (datasets.labels.files), so a file swapped for a link since the plan is refused, not read.
    ImageRefused names why; the reason never holds a path (the report names the file)."""
    try:
        handle = open_file(path)
    except FileNotFoundError:
        raise ImageRefused("file not found") from None
    except LabelError as exc:  # a link (LINK_NOT_FOLLOWED), a FIFO or a device
        raise ImageRefused(str(exc).removeprefix(f"{Path(path).name}: ")) from None
    except OSError as exc:
        raise ImageRefused(os_error_text(exc)) from None
    if file_size(handle) == 0:
        handle.close()
        raise ImageRefused("empty file (0 bytes)")
    return handle


def prepare_annotated(
    path: str, target, *, width: int, height: int, channels: int, resize_mode: str, seed: int
) -> tuple[np.ndarray, bytes, TargetFacts]:
    """load -> convert -> resize the image, and move its target with it: (pixels, target Datum
    bytes, facts). `target` is an N x 6 float32 array (detection, source pixels) or a MaskTarget."""
    with open_image(path) as handle:
        return _prepare(
            handle, target, width=width, height=height, channels=channels, resize_mode=resize_mode, seed=seed
        )


def _prepare(
    handle: BinaryIO, target, *, width: int, height: int, channels: int, resize_mode: str, seed: int
) -> tuple[np.ndarray, bytes, TargetFacts]:
    image = load_image(handle)  # no JPEG draft: boxes are in the full image's pixels
    try:
        orientation = image.getexif().get(0x0112, 1)
        if orientation not in (0, 1):
            raise ImageRefused(
                f"EXIF orientation {orientation}: its labels may be for the stored or the turned image; save it upright"
            )
        converted = convert_image(image, channels)
        w, h = converted.size
        geometry = fit_geometry(w, h, width, height, resize_mode)
        if geometry[2:] == (0, 0, width, height):  # squash, or the same aspect: Pillow alone
            if (w, h) != (width, height):
                converted = converted.resize((width, height), Image.Resampling.BILINEAR)
            pixels = _as_hwc(converted)
        else:
            pixels = resize_image(_as_hwc(converted), height, width, resize_mode, rng=np.random.default_rng(seed))
    finally:
        image.close()
    if isinstance(target, MaskTarget):
        value, facts = _mask_target(target, (w, h), geometry, width, height)
    else:
        value, facts = _box_target(np.asarray(target, dtype=np.float32).reshape(-1, 6), geometry, width, height)
    return pixels, value, facts


def _box_target(boxes: np.ndarray, geometry, width: int, height: int) -> tuple[bytes, TargetFacts]:
    scale_x, scale_y, left, top, _, _ = geometry
    out = boxes.copy()
    out[:, [1, 3]] = np.clip(boxes[:, [1, 3]] * scale_x + left, 0, width)
    out[:, [2, 4]] = np.clip(boxes[:, [2, 4]] * scale_y + top, 0, height)
    kept = out[out[:, 5] == 0]
    shapes = tuple(
        (float(b[3] - b[1]), float(b[4] - b[2]), float(b[1] + b[3]) / 2, float(b[2] + b[4]) / 2) for b in kept
    )
    facts = TargetFacts(classes=tuple(int(c) for c in kept[:, 0]), boxes=shapes, objects=len(kept))
    return encode_boxes(out), facts


def _mask_target(
    target: MaskTarget, size: tuple[int, int], geometry, width: int, height: int
) -> tuple[bytes, TargetFacts]:
    if target.mask_format.mode == "shapes":
        values = draw_shapes(target.shapes, *target.size)
    else:
        try:
            values, _ = load_mask(target.path, target.mask_format, "mask")
        except LabelError as exc:
            raise ImageRefused(str(exc)) from None
    if (values.shape[1], values.shape[0]) != size:
        raise ImageRefused(f"its mask is {values.shape[1]}x{values.shape[0]}, the image {size[0]}x{size[1]}")
    mask = np.frombuffer(target.lookup, dtype=np.uint8)[values]
    _, _, left, top, resized_w, resized_h = geometry
    if (resized_w, resized_h) != size:
        mask = np.asarray(Image.fromarray(mask, mode="L").resize((resized_w, resized_h), Image.Resampling.NEAREST))
    if (resized_w, resized_h) != (width, height):
        canvas = np.full((height, width), IGNORE_INDEX, dtype=np.uint8)  # fill's padding is no class
        canvas[top : top + resized_h, left : left + resized_w] = mask[: height - top, : width - left]
        mask = canvas
    counts = np.bincount(mask.ravel(), minlength=256)
    present = tuple(int(i) for i in np.flatnonzero(counts[:IGNORE_INDEX]))
    facts = TargetFacts(classes=present, areas=tuple(int(counts[i]) for i in present), objects=len(present))
    return encode_mask(np.ascontiguousarray(mask)), facts


def draw_shapes(shapes: tuple, width: int, height: int) -> np.ndarray:
    """COCO polygons and RLE as H x W source class indexes (0 where none is), later ones on top."""
    values = np.zeros((height, width), dtype=np.uint8)
    for index, kind, data in shapes:
        if kind == "polygons":
            canvas = Image.new("1", (width, height), 0)
            draw = ImageDraw.Draw(canvas)
            for points in data:
                draw.polygon(list(zip(points[0::2], points[1::2], strict=True)), fill=1)
            covered = np.asarray(canvas, dtype=bool)
        else:  # run lengths over the image in column order, starting with a run of zeros
            flat = np.zeros(width * height, dtype=bool)
            ends = np.cumsum(data)
            for start, end in zip(ends[0::2], ends[1::2], strict=False):
                flat[start:end] = True
            covered = flat.reshape(width, height).T
        values[covered] = index
    return values
