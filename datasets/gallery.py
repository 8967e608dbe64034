"""Thumbnails read straight from a dataset's LMDBs, a page at a time, per split and per class.

Detection and segmentation thumbnails carry their targets drawn on them (read from the split's
`<split>_targets_db`, the same keys): boxes outlined in their class's colour (ignore regions in
grey), masks as a colour overlay; each item lists the classes it holds."""

from __future__ import annotations

import base64
import io
import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from trainer.datum import DatumError, DatumLMDB, decode_datum
from trainer.protocol import IGNORE_INDEX
from trainer.targets import decode_boxes, decode_mask

PER_PAGE = 48
THUMB = 96
# Class colours (Tableau 10), the same in the gallery's drawings and its legend.
CLASS_COLOURS = (
    (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
    (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207),
)  # fmt: skip
IGNORE_COLOUR = (200, 200, 200)
MASK_OPACITY = 0.45


def _label_of(key: bytes) -> int | None:
    # Our keys (and DIGITS's) are "%08d_%d": index, label. Imported LMDBs are re-keyed that way;
    # detection and segmentation keys are "%08d" (their images have no one class).
    _, sep, tail = key.rpartition(b"_")
    if not sep:
        return None
    try:
        return int(tail)
    except ValueError:
        return None


def class_colour(index: int) -> tuple[int, int, int]:
    return CLASS_COLOURS[index % len(CLASS_COLOURS)]


def _with_target(image: Image.Image, target: np.ndarray | None, boxes: bool) -> Image.Image:
    """The image (stored size) with its boxes outlined or its mask laid over, in class colours."""
    if target is None:
        return image
    image = image.convert("RGB")
    if boxes:
        draw = ImageDraw.Draw(image)
        for cls, x1, y1, x2, y2, ignore in target.tolist():
            colour = IGNORE_COLOUR if ignore else class_colour(int(cls))
            draw.rectangle([x1, y1, max(x1, x2 - 1), max(y1, y2 - 1)], outline=colour)
        return image
    colours = np.array([class_colour(i) for i in range(256)], dtype=np.uint8)
    overlay = colours[target]
    pixels = np.asarray(image, dtype=np.float32)
    blend = np.where((target != IGNORE_INDEX)[..., None], MASK_OPACITY, 0.0)
    return Image.fromarray((pixels * (1 - blend) + overlay * blend).round().astype(np.uint8))


def _target_classes(target: np.ndarray, boxes: bool) -> list[int]:
    if boxes:
        return sorted({int(row[0]) for row in target if not row[5]})
    return [int(v) for v in np.unique(target) if v != IGNORE_INDEX]


def thumbnail_data_url(
    chw: np.ndarray, size: int | None = THUMB, target: np.ndarray | None = None, boxes: bool = True
) -> str:
    """The image as a PNG data URL, its target drawn on it; no larger than `size` (None: as stored)."""
    hwc = chw.transpose(1, 2, 0)
    image = _with_target(Image.fromarray(hwc[:, :, 0] if hwc.shape[2] == 1 else hwc), target, boxes)
    if size is not None:
        image.thumbnail((size, size), Image.Resampling.BILINEAR)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def gallery_page(
    folder: Path, split: str, *, label: int | None = None, page: int = 1, per_page: int = PER_PAGE
) -> dict:
    """{"items": [{"key", "label", "src"}], "page", "pages", "total"}; page counts from 1."""
    db = folder / f"{split}_db"
    if not (db / "data.mdb").is_file():
        return {"items": [], "page": 1, "pages": 0, "total": 0}
    # DatumLMDB shares one environment per path and process: py-lmdb refuses a second open.
    db = DatumLMDB(db)
    targets_path = folder / f"{split}_targets_db"
    targets = DatumLMDB(targets_path) if (targets_path / "data.mdb").is_file() else None
    try:
        keys = db.keys()
        if targets is None:
            indices = [i for i, k in enumerate(keys) if label is None or _label_of(k) == label]
        else:
            indices = _indices_holding(targets, len(keys), label)
        total = len(indices)
        pages = max(1, math.ceil(total / per_page))
        page = min(max(1, page), pages)
        items = []
        for index in indices[(page - 1) * per_page : page * per_page]:
            key = keys[index]
            name = key.decode("ascii", errors="replace")
            try:
                chw, record_label = decode_datum(db.raw(index), key=key)
                target, boxes = _target(targets, index, name) if targets is not None else (None, True)
            except DatumError as exc:
                items.append({"key": name, "label": _label_of(key), "src": None, "error": str(exc)})
                continue
            src = thumbnail_data_url(chw, target=target, boxes=boxes)
            item = {"key": name, "index": index, "label": record_label, "src": src}
            if target is not None:
                item["classes"] = _target_classes(target, boxes)
            items.append(item)
    finally:
        db.close()
        if targets is not None:
            targets.close()
    return {"items": items, "page": page, "pages": pages, "total": total}


def gallery_item(folder: Path, split: str, index: int) -> dict | None:
    """One record at its stored size, its target drawn (what a thumbnail opens to): {"key", "label",
    "src", "width", "height"}; None when the split has no such record."""
    db_path, targets_path = folder / f"{split}_db", folder / f"{split}_targets_db"
    if not (db_path / "data.mdb").is_file():
        return None
    db = DatumLMDB(db_path)
    targets = DatumLMDB(targets_path) if (targets_path / "data.mdb").is_file() else None
    try:
        keys = db.keys()
        if not 0 <= index < len(keys):
            return None
        name = keys[index].decode("ascii", errors="replace")
        try:
            chw, record_label = decode_datum(db.raw(index), key=keys[index])
            target, boxes = _target(targets, index, name) if targets is not None else (None, True)
        except DatumError as exc:
            return {"key": name, "label": _label_of(keys[index]), "src": None, "error": str(exc)}
    finally:
        db.close()
        if targets is not None:
            targets.close()
    src = thumbnail_data_url(chw, size=None, target=target, boxes=boxes)
    return {"key": name, "label": record_label, "src": src, "width": chw.shape[2], "height": chw.shape[1]}


def _target(targets: DatumLMDB, index: int, where: str) -> tuple[np.ndarray, bool]:
    """The index-th target and whether it is boxes (N x 6) or a mask (H x W), as the record says."""
    raw = targets.raw(index)
    try:
        return decode_boxes(raw, where=where), True
    except DatumError:
        return decode_mask(raw, where=where), False


def _indices_holding(targets: DatumLMDB, count: int, label: int | None) -> list[int]:
    if label is None:
        return list(range(count))
    found = []
    for index in range(count):
        try:
            target, boxes = _target(targets, index, str(index))
        except DatumError:
            continue
        if label in _target_classes(target, boxes):
            found.append(index)
    return found
