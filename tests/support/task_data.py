"""Detection and segmentation dataset folders of drawn shapes with known boxes and masks, in the
layout of docs/formats.md (images and targets in two Datum LMDBs per split), for the trainer's
tests and benchmarks; no pytest dependency. The datasets app's own importer writes the same layout
from label files (tests/datasets/)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from trainer.datum import encode_datum, write_datum_lmdb
from trainer.targets import encode_boxes, encode_mask

SHAPES = ("square", "disc")  # class 0 and 1: a filled rectangle and a filled ellipse
COLOURS = ((230, 60, 40), (40, 90, 230))


def draw_scene(rng: np.random.Generator, size: int, objects: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One image (H x W x 3 uint8), its boxes (N x 6: class, x1, y1, x2, y2, ignore) and its mask
    (H x W uint8: 0 background, 1 + class where a shape is)."""
    image = Image.new("RGB", (size, size), tuple(int(v) for v in rng.integers(0, 60, 3)))
    mask = Image.new("L", (size, size), 0)
    pen, mask_pen = ImageDraw.Draw(image), ImageDraw.Draw(mask)
    boxes = []
    for _ in range(objects):
        kind = int(rng.integers(0, len(SHAPES)))
        side = int(rng.integers(size // 5, size // 2))
        x1, y1 = (int(v) for v in rng.integers(0, size - side, 2))
        box = (x1, y1, x1 + side - 1, y1 + side - 1)
        draw = pen.rectangle if kind == 0 else pen.ellipse
        draw(box, fill=COLOURS[kind])
        (mask_pen.rectangle if kind == 0 else mask_pen.ellipse)(box, fill=1 + kind)
        boxes.append((kind, x1, y1, x1 + side, y1 + side, 0))
    return np.asarray(image), np.asarray(boxes, dtype=np.float32).reshape(-1, 6), np.asarray(mask)


def make_task_folder(
    path: str | os.PathLike[str],
    *,
    task: str,
    size: int = 64,
    train: int = 16,
    val: int = 8,
    test: int = 0,
    objects: int = 2,
    seed: int = 0,
) -> Path:
    """A dataset folder for `task` ("detection" or "segmentation") of `size` x `size` scenes."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    labels = list(SHAPES) if task == "detection" else ["background", *SHAPES]
    splits = {}
    for split, count in (("train", train), ("val", val), ("test", test)):
        if not count:
            continue
        scenes = [draw_scene(rng, size, objects) for _ in range(count)]
        keys = [b"%08d_-1" % i for i in range(count)]
        write_datum_lmdb(
            folder / f"{split}_db",
            ((key, encode_datum(image, -1, encoding="png")) for key, (image, _, _) in zip(keys, scenes, strict=True)),
            map_size=1 << 24,
        )
        targets = (encode_boxes(boxes) if task == "detection" else encode_mask(mask) for _, boxes, mask in scenes)
        write_datum_lmdb(folder / f"{split}_targets_db", zip(keys, targets, strict=True), map_size=1 << 24)
        counts = [0] * len(labels)
        for _, boxes, mask in scenes:
            if task == "detection":
                for kind in boxes[:, 0].astype(int):
                    counts[kind] += 1
            else:
                for kind in np.unique(mask):
                    counts[int(kind)] += 1
        splits[split] = {"db": f"{split}_db", "targets_db": f"{split}_targets_db", "count": count,
                         "class_counts": counts}  # fmt: skip
    meta = {"format_version": 1, "name": f"shapes-{task}", "task": task, "image_width": size, "image_height": size,
            "channels": 3, "resize_mode": "squash", "encoding": "png", "labels": labels, "splits": splits}  # fmt: skip
    (folder / "dataset.json").write_text(json.dumps(meta, indent=2))
    (folder / "labels.txt").write_text("".join(f"{label}\n" for label in labels))
    return folder
