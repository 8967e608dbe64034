"""Dataset build throughput: our parallel LMDB builder against a plain single-process Pillow loop.

Both sides do the same work on the same generated JPEGs: decode, convert to RGB, resize to
SIZE x SIZE (bilinear, squash), serialise a Caffe Datum with the same encoding, add the image to the
mean, and write it into a fresh LMDB in batched transactions. The table shows images/s and the
ratio; run it on a quiet machine (it uses every core).

    .venv/bin/python bench/bench_dataset_build.py --count 5000 --encoding none
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from datasets.build import ImageOptions, LmdbWriter, build_lmdbs, default_workers  # noqa: E402
from datasets.images import ImageLimits  # noqa: E402
from datasets.sources import SplitOptions, plan_folder  # noqa: E402
from trainer.datum import encode_datum  # noqa: E402


def generate(folder: Path, count: int, width: int, height: int, classes: int = 10) -> Path:
    """`count` photo-like JPEGs (smooth gradients + shapes + mild noise), cached between runs."""
    marker = folder / f".complete-{count}-{width}x{height}"
    if marker.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    for i in range(count):
        label = i % classes
        (folder / f"class_{label}").mkdir(parents=True, exist_ok=True)
        base = rng.uniform(0, 255, 3)
        slope = rng.uniform(-0.4, 0.4, (2, 3))
        img = base + xx[..., None] * slope[0] + yy[..., None] * slope[1]
        cx, cy, r = rng.uniform(0, width), rng.uniform(0, height), rng.uniform(20, 120)
        img[(xx - cx) ** 2 + (yy - cy) ** 2 < r * r] = rng.uniform(0, 255, 3)
        img += rng.normal(0, 6, img.shape)
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(
            folder / f"class_{label}" / f"{i:06d}.jpg", quality=90
        )
    marker.touch()
    return folder


def cpu_seconds() -> float:
    """User + system CPU time of this process and its finished children (the build workers)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def baseline(files: list[tuple[str, int]], out: Path, size: int, encoding: str) -> float:
    """The plain loop: one process, Pillow decode + resize, Datum encode, LMDB write, mean."""
    out.mkdir(parents=True)
    writer = LmdbWriter(out / "train_db")
    mean = np.zeros((size, size, 3), np.float64)
    start = time.perf_counter()
    for index, (path, label) in enumerate(files):
        with Image.open(path) as image:
            pixels = np.asarray(image.convert("RGB").resize((size, size), Image.Resampling.BILINEAR))
        mean += pixels
        writer.put(b"%08d_%d" % (index, label), encode_datum(pixels, label, encoding=encoding))
    writer.close()
    return time.perf_counter() - start


def ours(root: Path, out: Path, size: int, encoding: str, workers: int) -> float:
    start = time.perf_counter()
    plan = plan_folder(root, SplitOptions(val_percent=0, shuffle=False))
    build_lmdbs(
        plan.splits,
        plan.labels,
        out,
        name="bench",
        workers=workers,
        limits=ImageLimits(),
        options=ImageOptions(width=size, height=size, channels=3, resize_mode="squash", encoding=encoding),
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--width", type=int, default=500)
    parser.add_argument("--height", type=int, default=375)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--encoding", choices=("none", "png", "jpg"), default="none")
    parser.add_argument("--workers", type=int, default=0, help="build processes (default: one per core)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    args = parser.parse_args()
    workers = args.workers or default_workers()

    source = generate(args.out / f"jpegs-{args.width}x{args.height}", args.count, args.width, args.height)
    files = [(p, y) for p, y in plan_folder(source, SplitOptions(val_percent=0, shuffle=False)).splits["train"]]
    for name in ("baseline-db", "ours-db"):
        shutil.rmtree(args.out / name, ignore_errors=True)

    load_before = os.getloadavg()[0]
    cpu0 = cpu_seconds()
    t_base = baseline(files, args.out / "baseline-db", args.size, args.encoding)
    cpu1 = cpu_seconds()
    t_ours = ours(source, args.out / "ours-db", args.size, args.encoding, workers)
    cpu2 = cpu_seconds()
    n = len(files)
    print(
        f"dataset build: {n} JPEGs {args.width}x{args.height} -> {args.size}x{args.size}, encoding "
        f"{args.encoding}, {workers} worker processes, {os.cpu_count()} CPUs, "
        f"load average {load_before:.2f} before / {os.getloadavg()[0]:.2f} after"
    )
    print(f"| {'builder':<40} | {'seconds':>8} | {'images/s':>9} | {'CPU ms/image':>12} |")
    print(f"| {'-' * 40} | {'-' * 7}: | {'-' * 8}: | {'-' * 11}: |")
    rows = (
        ("single-process Pillow loop (baseline)", t_base, cpu1 - cpu0),
        ("datasets.build (ours)", t_ours, cpu2 - cpu1),
    )
    for name, seconds, cpu in rows:
        print(f"| {name:<40} | {seconds:8.1f} | {n / seconds:9.1f} | {1000 * cpu / n:12.2f} |")
    print(f"ratio ours / baseline (images/s): {t_base / t_ours:.2f}x")
    for name in ("baseline-db", "ours-db"):
        shutil.rmtree(args.out / name, ignore_errors=True)


if __name__ == "__main__":
    main()
