"""Input pipeline: train from an LMDB dataset folder with the default loader settings and
report the share of step time spent waiting for data (target < 5%), beside the images/s of the
same engine fed from memory (the ceiling the input pipeline could reach).

    .venv/bin/python bench/bench_trainer_input.py [--images 2048] [--side 32] [--network resnet18]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.trainer_data import make_dataset_folder  # noqa: E402
from trainer.bench.loops import engine_run_in_memory, random_batches, time_engine  # noqa: E402
from trainer.config import DataConfig, config_from_dict  # noqa: E402
from trainer.events import ListReporter  # noqa: E402
from trainer.run import train  # noqa: E402


def from_lmdb(cfg_raw: dict) -> tuple[float, float, int]:
    reporter = ListReporter()
    code = train(config_from_dict(cfg_raw), reporter=reporter)
    if code != 0:
        raise SystemExit(f"training failed: {reporter.events[-1]}")
    metrics = reporter.of_type("metrics")[1:]  # the first interval includes worker start-up
    rate = statistics.median(m["images_per_sec"] for m in metrics)
    wait = sum(m["data_wait_share"] for m in metrics) / len(metrics)
    return rate, wait, len(metrics)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--side", type=int, default=32)
    parser.add_argument("--network", default="resnet18")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--epochs", type=float, default=1.0)
    args = parser.parse_args()
    defaults = DataConfig()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for encoding in ("none", "png"):
            folder = make_dataset_folder(
                Path(tmp) / f"ds_{encoding}",
                num_classes=10,
                size=args.side,
                channels=3,
                train=args.images,
                val=0,
                encoding=encoding,
            )
            raw = {
                "run_dir": str(Path(tmp) / f"run_{encoding}"),
                "network": args.network,
                "batch_size": args.batch,
                "epochs": args.epochs,
                "val_interval": 0,
                "snapshot_interval": 0,
                "metrics_interval": 5,
                "data": {"dataset": str(folder), "random_flip": True},
            }
            rate, wait, intervals = from_lmdb(raw)
            rows.append((f"LMDB, {encoding} datums", rate, wait, intervals))
        cfg = config_from_dict(
            {**raw, "run_dir": str(Path(tmp) / "run_mem"), "data": {"dataset": str(folder), "num_workers": 0}}
        )
        batches = random_batches(8, args.batch, (3, args.side, args.side), 10)
        memory = statistics.median(
            time_engine(engine_run_in_memory(cfg, batches, torch.device("cpu")), 1).images_per_sec for _ in range(3)
        )
    print(
        f"{args.network} 3x{args.side}x{args.side}, batch {args.batch}, {args.images} images, cpu, "
        f"{torch.get_num_threads()} threads; loader defaults: num_workers={defaults.num_workers}, "
        f"prefetch_factor={defaults.prefetch_factor}"
    )
    print("| data | images/s | data-wait share | vs in-memory |\n| --- | ---: | ---: | ---: |")
    for name, rate, wait, _ in rows:
        print(f"| {name} | {rate:,.0f} | {wait:.1%} | {rate / memory:.3f} |")
    print(f"| in memory (same engine) | {memory:,.0f} | - | 1.000 |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
