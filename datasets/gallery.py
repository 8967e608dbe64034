"""Thumbnails read straight from a dataset's LMDBs, a page at a time, per split and per class."""

from __future__ import annotations

import base64
import io
import math
from pathlib import Path

import numpy as np
from PIL import Image

from trainer.datum import DatumError, DatumLMDB, decode_datum

PER_PAGE = 48
THUMB = 96


def _label_of(key: bytes) -> int | None:
    # Our keys (and DIGITS's) are "%08d_%d": index, label. Imported LMDBs are re-keyed that way.
    _, _, tail = key.rpartition(b"_")
    try:
        return int(tail)
    except ValueError:
        return None


def thumbnail_data_url(chw: np.ndarray, size: int = THUMB) -> str:
    hwc = chw.transpose(1, 2, 0)
    image = Image.fromarray(hwc[:, :, 0] if hwc.shape[2] == 1 else hwc)
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
    try:
        keys = db.keys()
        indices = [i for i, k in enumerate(keys) if label is None or _label_of(k) == label]
        total = len(indices)
        pages = max(1, math.ceil(total / per_page))
        page = min(max(1, page), pages)
        items = []
        for index in indices[(page - 1) * per_page : page * per_page]:
            key = keys[index]
            name = key.decode("ascii", errors="replace")
            try:
                chw, record_label = decode_datum(db.raw(index), key=key)
            except DatumError as exc:
                items.append({"key": name, "label": _label_of(key), "src": None, "error": str(exc)})
                continue
            items.append({"key": name, "label": record_label, "src": thumbnail_data_url(chw)})
    finally:
        db.close()
    return {"items": items, "page": page, "pages": pages, "total": total}
