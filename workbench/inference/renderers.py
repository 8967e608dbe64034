"""What one image becomes for each task beyond classification (engine.classify_one): boxes for a
detector, a mask with its legend for a segmentation network. Runs where the engine runs."""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

from trainer.protocol import IGNORE_INDEX
from workbench.inference.engine import png_data_url


def detect_one(detector, image: Image.Image, min_score: float = 0.05) -> list[dict[str, Any]]:
    """Boxes in the image's own pixels, best first: label, score, box [x1, y1, x2, y2]."""
    [found] = detector.detect([image], min_score=min_score)
    return sorted(found, key=lambda box: -box["score"])


def segment_one(segmenter, image: Image.Image) -> dict[str, Any]:
    """The class of every pixel at the image's own size, as a grey PNG of class indexes (for
    programs) and a colour one (for the page), and each class present with its share."""
    [mask] = segmenter.segment([image])
    palette = class_palette()
    counts = np.bincount(mask.ravel(), minlength=len(segmenter.labels))
    classes = [
        {
            "index": index,
            "label": label,
            "color": "#" + bytes(palette[index]).hex(),
            "share": float(counts[index]) / mask.size,
        }
        for index, label in enumerate(segmenter.labels)
        if index != IGNORE_INDEX and counts[index]
    ]
    return {"mask": png_data_url(mask), "colors": png_data_url(palette[mask]), "classes": classes}


def class_palette() -> np.ndarray:
    """VOC's colour map (bit-interleaved), which segmentation users know: background black."""
    colours = np.zeros((256, 3), dtype=np.uint8)
    for index in range(256):
        value, r, g, b = index, 0, 0, 0
        for bit in range(8):
            r |= ((value >> 0) & 1) << (7 - bit)
            g |= ((value >> 1) & 1) << (7 - bit)
            b |= ((value >> 2) & 1) << (7 - bit)
            value >>= 3
        colours[index] = (r, g, b)
    return colours
