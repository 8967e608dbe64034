"""The engine's training loop versus a minimal hand-written PyTorch loop.

Same model (same initial weights), same optimizer, same in-memory uint8 batches, same
normalisation; the engine adds its meter, LR scheduler, autocast/GradScaler values, metrics
events every 10 steps and the stop check. Target: >= 0.97 of the minimal loop's images/s.
Trials alternate (engine, minimal, engine, ...) so a neighbour's load on a shared machine hits
both sides alike; the ratio uses the best trial of each side (like timeit: the least-disturbed
run is the best estimate of the code's own cost), the median is printed beside it.

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

from trainer.benchmarking import engine_run_in_memory, random_batches, time_engine, time_minimal_loop  # noqa: E402
from trainer.config import config_from_dict  # noqa: E402
from trainer.testing import make_dataset_folder  # noqa: E402

CASES = [  # (network, image side, channels, batch, batches per pass)
    ("lenet", 28, 1, 256, 8),      # a tiny step: per-step overhead shows most here
    ("resnet18", 32, 3, 64, 4),    # a realistic convnet step
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=1, help="passes over the batches per trial")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for network, side, channels, batch, count in CASES:
            folder = make_dataset_folder(Path(tmp) / f"{network}_ds", num_classes=10, size=side,
                                         channels=channels, train=batch, val=0)
            cfg = config_from_dict({
                "run_dir": str(Path(tmp) / f"{network}_run"), "network": network, "batch_size": batch,
                "epochs": 1, "val_interval": 0, "snapshot_interval": 0, "metrics_interval": 10,
                "devices": ["cpu" if device.type == "cpu" else device.index or 0],
                "data": {"dataset": str(folder), "num_workers": 0},
                "solver": {"optimizer": "sgd", "base_lr": 0.01, "momentum": 0.9},
            })
            batches = random_batches(count, batch, (channels, side, side), 10, device)
            run = engine_run_in_memory(cfg, batches, device)
            baseline_model = copy.deepcopy(run.model_without_ddp)
            mean = run.data.normalize.mean
            ours, base = [], []
            for _ in range(args.trials):
                ours.append(time_engine(run, args.epochs).images_per_sec)
                base.append(time_minimal_loop(baseline_model, batches, mean, device, 0.01, 0.9,
                                              args.epochs).images_per_sec)
            rows.append((f"{network} {channels}x{side}x{side} batch {batch}", max(ours), max(base),
                         statistics.median(ours), statistics.median(base)))
    print(f"device {device}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{args.trials} alternating trials of {args.epochs} pass(es)")
    print("| case | engine images/s (best) | minimal loop images/s (best) | ratio (best) | ratio (median) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, o, b, om, bm in rows:
        print(f"| {name} | {o:,.0f} | {b:,.0f} | {o / b:.3f} | {om / bm:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
