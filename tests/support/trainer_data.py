"""Small dataset folders (LMDB splits, labels, mean) for tests and benchmarks; no pytest dependency."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

from trainer.datum import encode_datum, write_datum_lmdb, write_mean_blobproto


def _write_split(folder: Path, split: str, images: np.ndarray, labels: np.ndarray, encoding: str) -> None:
    records = (
        (b"%08d_%d" % (i, int(y)), encode_datum(img, int(y), encoding=encoding))
        for i, (img, y) in enumerate(zip(images, labels, strict=True))
    )
    write_datum_lmdb(folder / f"{split}_db", records, map_size=1 << 24)


def write_dataset_folder(
    path: str | os.PathLike[str],
    splits: dict[str, tuple[np.ndarray, np.ndarray]],
    labels: list[str],
    *,
    encoding: str = "none",
    name: str = "test",
    resize_mode: str = "squash",
    digits_layout: bool = False,
) -> Path:
    """Write a dataset folder from in-memory images.

    `splits` maps "train"/"val"/"test" to (uint8 N x H x W x C RGB images, int labels). With
    `digits_layout=True` the folder looks like a DIGITS job (no dataset.json, no mean.npy).
    Whatever was at `path` goes first: dataset rows are rolled back after each test and their ids
    (their folders) used again, and an LMDB written over another keeps the other's extra records
    (a run trained on 8x8 grey and 32x32 colour images at once).
    """
    folder = Path(path)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    train_images = splits["train"][0]
    if train_images.ndim == 3:
        train_images = train_images[..., None]
    _, h, w, c = train_images.shape
    meta_splits = {}
    for split, (images, ys) in splits.items():
        if len(images) == 0:
            continue
        _write_split(folder, split, images, np.asarray(ys), encoding)
        counts = np.bincount(np.asarray(ys), minlength=len(labels)).tolist()
        meta_splits[split] = {"db": f"{split}_db", "count": len(images), "class_counts": counts}
    (folder / "labels.txt").write_text("".join(f"{label}\n" for label in labels), encoding="utf-8")
    mean = train_images.astype(np.float64).mean(axis=0).transpose(2, 0, 1).astype(np.float32)
    write_mean_blobproto(folder / "mean.binaryproto", mean)
    if digits_layout:
        return folder
    np.save(folder / "mean.npy", mean)
    mean_u8 = np.clip(np.rint(mean), 0, 255).astype(np.uint8).transpose(1, 2, 0)
    Image.fromarray(mean_u8[:, :, 0] if c == 1 else mean_u8).save(folder / "mean.png")
    meta = {
        "format_version": 1,
        "name": name,
        "image_width": w,
        "image_height": h,
        "channels": c,
        "resize_mode": resize_mode,
        "encoding": encoding,
        "labels": list(labels),
        "splits": meta_splits,
        "mean": {"npy": "mean.npy", "png": "mean.png", "binaryproto": "mean.binaryproto"},
    }
    (folder / "dataset.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return folder


def make_dataset_folder(
    path: str | os.PathLike[str],
    *,
    num_classes: int = 3,
    size: int | tuple[int, int] = 8,
    channels: int = 1,
    train: int = 24,
    val: int = 12,
    test: int = 0,
    encoding: str = "none",
    seed: int = 0,
    digits_layout: bool = False,
) -> Path:
    """A synthetic, learnable dataset: class k is a bright bar at a class-specific position."""
    h, w = (size, size) if isinstance(size, int) else size
    rng = np.random.default_rng(seed)

    def make(count: int) -> tuple[np.ndarray, np.ndarray]:
        ys = np.arange(count) % num_classes
        rng.shuffle(ys)
        images = rng.integers(0, 60, size=(count, h, w, channels), dtype=np.uint8)
        for i, y in enumerate(ys):
            row = int(y) * h // num_classes
            images[i, row : row + max(1, h // num_classes), :, :] = 200 + rng.integers(0, 50)
        return images, ys

    splits = {"train": make(train), "val": make(val), "test": make(test)}
    labels = [f"class_{k}" for k in range(num_classes)]
    return write_dataset_folder(path, splits, labels, encoding=encoding, name="synthetic", digits_layout=digits_layout)


def make_digits_folder(
    path: str | os.PathLike[str], *, val_fraction: float = 0.25, seed: int = 0, encoding: str = "none"
) -> Path:
    """scikit-learn's 1,797 real 8x8 handwritten digits as a dataset folder (gray, 0..255)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = np.clip(digits.images * 16, 0, 255).astype(np.uint8)  # 0..16 -> 0..255
    ys = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(ys))
    n_val = int(len(ys) * val_fraction)
    val_idx, train_idx = order[:n_val], order[n_val:]
    splits = {"train": (images[train_idx], ys[train_idx]), "val": (images[val_idx], ys[val_idx])}
    return write_dataset_folder(path, splits, [str(d) for d in range(10)], encoding=encoding, name="digits")
