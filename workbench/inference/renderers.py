"""What one image becomes for each task beyond classification (engine.classify_one): boxes for a
detector, a mask with its legend for a segmentation network. Runs where the engine runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from trainer.protocol import IGNORE_INDEX
from workbench.inference import engine
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


# ----------------------------------------------------------------------------- many images
# A detect-many or segment-many job: job.run_job's runner with these renderers in place of
# classify_folder; the same upload, batches, skipped files, progress, result.json and CSV.


def detect_folder(detector, root: Path, out: Path, *, min_score: float = 0.05, progress=None) -> dict[str, Any]:
    """Boxes of every image under `root` (in each image's own pixels); `results.csv` holds one
    line per box (an image without any: one line with an empty label)."""

    def render(images: list[tuple[str, Image.Image]]) -> list[dict[str, Any]]:
        found = detector.detect([image for _, image in images], min_score=min_score)
        return [
            {"path": name, "width": image.size[0], "height": image.size[1],
             "boxes": sorted(boxes, key=lambda box: -box["score"])}
            for (name, image), boxes in zip(images, found, strict=True)
        ]  # fmt: skip

    def csv_lines(row: dict[str, Any]) -> list[list[Any]]:
        return [
            [row["path"], box["label"], f"{box['score']:.6f}", *(f"{v:.2f}" for v in box["box"])]
            for box in row["boxes"]
        ] or [[row["path"], "", "", "", "", "", ""]]

    header = ["path", "label", "score", "x1", "y1", "x2", "y2"]
    result = engine.render_folder(root, out, render, header, csv_lines, progress=progress)
    counts: dict[str, int] = {}
    for row in result["rows"]:
        for box in row["boxes"]:
            counts[box["label"]] = counts.get(box["label"], 0) + 1
    return {**result, "min_score": min_score, "boxes": sum(counts.values()), "class_counts": counts}


def segment_folder(segmenter, root: Path, out: Path, *, progress=None) -> dict[str, Any]:
    """A class per pixel of every image under `root`: each image's colour mask as a PNG in
    `masks/`, and the share of each class; `results.csv` holds one line per image."""
    palette = class_palette()
    folder = out / "masks"
    folder.mkdir(parents=True, exist_ok=True)
    labels = segmenter.labels
    numbered = iter(range(1 << 62))

    def render(images: list[tuple[str, Image.Image]]) -> list[dict[str, Any]]:
        rows = []
        for (name, image), mask in zip(images, segmenter.segment([image for _, image in images]), strict=True):
            number = next(numbered)
            Image.fromarray(palette[mask]).save(folder / f"{number}.png")
            counts = np.bincount(mask.ravel(), minlength=len(labels))
            shares = {labels[i]: float(counts[i]) / mask.size for i in range(len(labels)) if counts[i]}
            rows.append({"path": name, "mask": f"{number}.png", "width": image.size[0], "height": image.size[1],
                         "shares": shares})  # fmt: skip
        return rows

    def csv_lines(row: dict[str, Any]) -> list[list[Any]]:
        return [[row["path"], *(f"{row['shares'].get(label, 0.0):.6f}" for label in labels)]]

    result = engine.render_folder(root, out, render, ["path", *labels], csv_lines, progress=progress)
    legend = [{"label": label, "color": "#" + bytes(palette[i]).hex()} for i, label in enumerate(labels)]
    return {**result, "legend": legend}
