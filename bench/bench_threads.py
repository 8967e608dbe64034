"""Intra-op threads per training process: the trainer's share of the usable cores
(trainer/threads.py) against torch's default (a thread per core), side by side.

Each trial runs the real trainer (`trainer.run.train`, its loader workers and, with two
processes, its spawned ranks) in a fresh Python process, once as it is and once with
OMP_NUM_THREADS set to the thread count torch starts with (the trainer leaves an operator's
OMP_NUM_THREADS alone, so that side trains with torch's default). Sides alternate (ours,
default, ours, ...) so a neighbour's load hits both alike; images/s is the median of the run's
metrics events after the first (the trainer's own measure, data waits included), and the table
shows the median over trials of each side and their ratio.

    .venv/bin/python bench/bench_threads.py [--trials 3] [--cases lenet,resnet18,resnet18x2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.trainer_data import make_dataset_folder  # noqa: E402
from trainer.threads import thread_share, usable_cores  # noqa: E402

CASES = {  # name: (network, image side, channels, batch, processes, loader workers per process)
    "lenet": ("lenet", 28, 1, 64, 1, 2),
    "resnet18": ("resnet18", 32, 3, 32, 1, 2),
    "resnet18x2": ("resnet18", 32, 3, 32, 2, 2),
}
TRAIN_IMAGES = 320

CHILD = """
import json, statistics, sys
from trainer.config import config_from_dict
from trainer.events import ListReporter
from trainer.run import train
reporter = ListReporter()
code = train(config_from_dict(json.loads(sys.argv[1])), reporter=reporter)
rates = [event["images_per_sec"] for event in reporter.of_type("metrics")][1:]
print(json.dumps({"code": code, "images_per_sec": statistics.median(rates) if rates else None}))
"""


def torch_default_threads() -> int:
    """The intra-op threads torch starts a process with, read in a fresh one without OMP_NUM_THREADS."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    code = "import torch; print(torch.get_num_threads())"
    return int(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)


def one_run(config: dict, threads: int | None) -> float:
    """Images/s of one training run in a fresh process; `threads` None: the trainer's own share."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["PYTHONPATH"] = str(ROOT)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(config)], env=env, capture_output=True, text=True, cwd=ROOT
    )
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise SystemExit(f"the trainer's process failed:\n{done.stderr[-3000:]}") from None
    if answer["code"] != 0 or answer["images_per_sec"] is None:
        raise SystemExit(f"the run ended with {answer}:\n{done.stderr[-3000:]}")
    return float(answer["images_per_sec"])


def case_config(tmp: Path, name: str, epochs: float) -> dict:
    network, side, channels, batch, processes, workers = CASES[name]
    folder = tmp / f"{network}-{side}-{channels}"
    if not folder.exists():
        make_dataset_folder(folder, num_classes=10, size=side, channels=channels, train=TRAIN_IMAGES, val=0)
    return {
        "run_dir": str(tmp / f"run-{name}"),
        "network": network,
        "batch_size": batch * processes,
        "epochs": epochs,
        "devices": ["cpu"] * processes,
        "val_interval": 0,
        "snapshot_interval": 0,
        "metrics_interval": 2,
        "data": {"dataset": str(folder), "num_workers": workers},
        "solver": {"optimizer": "sgd", "base_lr": 0.01, "momentum": 0.9},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    args = parser.parse_args()
    default, cores = torch_default_threads(), usable_cores()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for name in args.cases.split(","):
            _, _, _, batch, processes, workers = CASES[name]
            config = case_config(tmp, name, args.epochs)
            ours, base = [], []
            for _ in range(args.trials):
                ours.append(one_run(config, None))
                base.append(one_run(config, default))
            share = thread_share(cores, processes, workers)
            rows.append((name, batch, processes, workers, share, statistics.median(ours), statistics.median(base)))
    load = os.getloadavg()[0]
    print(f"{cores} usable core(s), torch's default {default} thread(s), load average {load:.1f}, {args.trials} trials")
    print(
        "| case | processes x loader workers | ours: threads | ours images/s | default: threads "
        "| default images/s | ratio (ours / default) |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name, batch, processes, workers, share, o, b in rows:
        print(
            f"| {name} batch {batch}/process | {processes} x {workers} | {share} | {o:,.0f} | {default} "
            f"| {b:,.0f} | **{o / b:.2f}** |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
