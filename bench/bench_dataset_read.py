"""Dataset read throughput: images/s from our LMDB into uint8 tensors, against decoding the same
images from their JPEG files.

The LMDB is built once by datasets.build (raw `none` and `png` encodings); each reader then goes
through every image once, in one process, and ends with a C x H x W uint8 torch tensor:
- LMDB: trainer.datum.DatumLMDB (what the trainer uses) -> torch.from_numpy;
- JPEG: Pillow decode of the original file + resize to the same size (what a folder-based loader
  does per epoch), and decode alone for reference.

    .venv/bin/python bench/bench_dataset_read.py --count 2000
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_dataset_build import generate  # noqa: E402

from datasets.build import ImageOptions, build_lmdbs, default_workers  # noqa: E402
from datasets.images import ImageLimits  # noqa: E402
from datasets.sources import SplitOptions, plan_folder  # noqa: E402
from trainer.datum import DatumLMDB  # noqa: E402


def read_lmdb(path: Path) -> tuple[float, int]:
    db = DatumLMDB(path)
    n = len(db)  # keys listed before timing, as the trainer does once per dataset
    start = time.perf_counter()
    for i in range(n):
        pixels, _ = db[i]
        tensor = torch.from_numpy(pixels)
    assert tensor.dtype == torch.uint8
    seconds = time.perf_counter() - start
    db.close()
    return seconds, n


def read_jpegs(files: list[str], size: int | None) -> tuple[float, int]:
    start = time.perf_counter()
    for path in files:
        with Image.open(path) as image:
            image = image.convert("RGB")
            if size is not None:
                image = image.resize((size, size), Image.Resampling.BILINEAR)
            tensor = torch.from_numpy(np.asarray(image).transpose(2, 0, 1).copy())
    assert tensor.dtype == torch.uint8
    return time.perf_counter() - start, len(files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--width", type=int, default=500)
    parser.add_argument("--height", type=int, default=375)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    args = parser.parse_args()
    torch.set_num_threads(1)

    source = generate(args.out / f"jpegs-{args.width}x{args.height}", args.count, args.width, args.height)
    plan = plan_folder(source, SplitOptions(val_percent=0, shuffle=False))
    entries = plan.splits["train"][: args.count]
    files = [p for p, _ in entries]
    rows = []
    for encoding in ("none", "png", "jpg"):
        out = args.out / f"read-{encoding}"
        shutil.rmtree(out, ignore_errors=True)
        build_lmdbs(
            {"train": entries},
            plan.labels,
            out,
            name="read",
            workers=default_workers(),
            limits=ImageLimits(),
            options=ImageOptions(args.size, args.size, 3, "squash", encoding),
        )
        seconds, n = read_lmdb(out / "train_db")
        mb = sum(f.stat().st_size for f in (out / "train_db").iterdir()) / 1e6
        rows.append((f"our LMDB, encoding {encoding} ({mb:.0f} MB)", seconds, n))
        shutil.rmtree(out)
    seconds, n = read_jpegs(files, args.size)
    rows.append((f"JPEG files: decode + resize to {args.size} (baseline)", seconds, n))
    seconds, n = read_jpegs(files, None)
    rows.append((f"JPEG files: decode only, {args.width}x{args.height}", seconds, n))

    base = rows[3][2] / rows[3][1]
    print(f"dataset read: {len(files)} images -> uint8 C x H x W tensors, one process")
    print(f"| {'reader':<52} | {'images/s':>9} | {'vs baseline':>11} |")
    print(f"| {'-' * 52} | {'-' * 8}: | {'-' * 10}: |")
    for name, seconds, n in rows:
        print(f"| {name:<52} | {n / seconds:9.0f} | {n / seconds / base:10.2f}x |")


if __name__ == "__main__":
    main()
