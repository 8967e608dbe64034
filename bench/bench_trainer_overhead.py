"""The engine's training loop versus a minimal hand-written PyTorch loop.

Same model (same initial weights), same optimizer, same in-memory uint8 batches, same
normalisation; the engine adds its meter, LR scheduler, autocast/GradScaler values, metrics
events every 10 steps and the stop check. Target: >= 0.97 of the minimal loop's images/s.
Trials alternate (engine, minimal, engine, ...) so a neighbour's load on a shared machine hits
both sides alike. Two ratios: wall-clock images/s (best trial of each side, like timeit: the
least-disturbed run), and images per second of process CPU time (median; with one thread this
counts only the work the loop itself does, so it stays meaningful while neighbours compete for
the cores). On a GPU, or an idle machine, the wall-clock ratio is the one that matters.

    .venv/bin/python bench/bench_trainer_overhead.py [--trials 5] [--device cpu]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.trainer_data import make_dataset_folder  # noqa: E402
from trainer.bench.loops import engine_run_in_memory, random_batches, time_engine, time_minimal_loop  # noqa: E402
from trainer.config import config_from_dict  # noqa: E402

CASES = [  # (network, image side, channels, batch, batches per pass)
    ("lenet", 28, 1, 256, 8),  # a tiny step: per-step overhead shows most here
    ("resnet18", 32, 3, 64, 4),  # a realistic convnet step
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=1, help="passes over the batches per trial")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads; 1 by default because on a shared machine a multi-threaded "
        "step's barrier waits measure the neighbours, not the loop",
    )
    parser.add_argument("--cases", default="lenet,resnet18", help="comma-separated networks from the table")
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for network, side, channels, batch, count in CASES:
            if network not in args.cases.split(","):
                continue
            folder = make_dataset_folder(
                Path(tmp) / f"{network}_ds", num_classes=10, size=side, channels=channels, train=batch, val=0
            )
            cfg = config_from_dict(
                {
                    "run_dir": str(Path(tmp) / f"{network}_run"),
                    "network": network,
                    "batch_size": batch,
                    "epochs": 1,
                    "val_interval": 0,
                    "snapshot_interval": 0,
                    "metrics_interval": 10,
                    "devices": ["cpu" if device.type == "cpu" else device.index or 0],
                    "data": {"dataset": str(folder), "num_workers": 0},
                    "solver": {"optimizer": "sgd", "base_lr": 0.01, "momentum": 0.9},
                }
            )
            batches = random_batches(count, batch, (channels, side, side), 10, device)
            run = engine_run_in_memory(cfg, batches, device)
            baseline_model = copy.deepcopy(run.model_without_ddp)
            mean = run.data.normalize.mean
            ours, base = [], []
            for _ in range(args.trials):
                ours.append(time_engine(run, args.epochs))
                base.append(time_minimal_loop(baseline_model, batches, mean, device, 0.01, 0.9, args.epochs))
            wall_o, wall_b = max(t.images_per_sec for t in ours), max(t.images_per_sec for t in base)
            cpu_o = statistics.median(t.images_per_cpu_sec for t in ours)
            cpu_b = statistics.median(t.images_per_cpu_sec for t in base)
            rows.append((f"{network} {channels}x{side}x{side} batch {batch}", wall_o, wall_b, cpu_o, cpu_b))
    print(
        f"device {device}, torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
        f"{args.trials} alternating trials of {args.epochs} pass(es)"
    )
    print(
        "| case | engine images/s (wall, best) | minimal images/s (wall, best) | ratio (wall) "
        "| engine images/CPU-s (median) | minimal images/CPU-s (median) | ratio (CPU) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, wo, wb, co, cb in rows:
        print(f"| {name} | {wo:,.0f} | {wb:,.0f} | {wo / wb:.3f} | {co:,.0f} | {cb:,.0f} | {co / cb:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
