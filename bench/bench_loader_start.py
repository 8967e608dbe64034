"""A rank's loader workers started by fork (the trainer's choice) against spawn (what a spawned
rank inherits as its default), side by side in one run.

The launcher spawns each rank, and a spawned process takes "spawn" as its default start method:
every DataLoader worker it starts then imports torch and the trainer anew. trainer/data.py
forks them instead. This bench starts --ranks processes the way the launcher does (spawn), and
in each builds the trainer's own loaders (trainer.data.build_data, --workers workers, persistent
train workers, fresh validation workers at each validation as in a run) over a small dataset
folder, then times --epochs epochs of train and validation batches; the two start methods take
turns --repeats times. Prints a markdown table of seconds to the first batch and per epoch, and
the ratio.

    .venv/bin/python bench/bench_loader_start.py [--ranks 2] [--workers 2] [--epochs 3] [--repeats 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trainer.data as trainer_data  # noqa: E402
from tests.support.trainer_data import make_dataset_folder  # noqa: E402
from trainer.config import config_from_dict  # noqa: E402
from trainer.dataset_folder import load_dataset_folder  # noqa: E402
from trainer.tasks import task_for  # noqa: E402

SIDES = {"fork (the trainer's)": "fork", "spawn (a spawned rank's default)": None}


def rank_main(folder: str, start_method: str | None, rank: int, args: argparse.Namespace, results) -> None:
    """One rank: the trainer's loaders with `start_method` for their workers, timed over epochs."""
    # Each spawned rank imports trainer.data anew (as the launcher's do) and sets its own choice.
    trainer_data._LOADER_START = start_method  # None: the DataLoader takes the process's default
    cfg = config_from_dict(
        {"network": "lenet", "batch_size": 16, "devices": ["cpu"], "run_dir": folder,
         "data": {"dataset": folder, "num_workers": args.workers}}
    )  # fmt: skip
    info = load_dataset_folder(folder)
    started = time.perf_counter()
    data = trainer_data.build_data(cfg, info, task=task_for(info.task), rank=rank, world=args.ranks)
    first_batch = None
    for epoch in range(args.epochs):
        data.train_sampler.set_epoch(epoch)
        for _ in data.train_loader:
            first_batch = first_batch or time.perf_counter() - started
        for _ in data.val_loader:  # fresh workers each time, as at each validation of a run
            pass
    results.put((first_batch, (time.perf_counter() - started) / args.epochs))
    data.close()


def time_side(folder: str, start_method: str | None, args: argparse.Namespace) -> tuple[float, float]:
    """Spawns the ranks; returns the slowest rank's (seconds to its first batch, seconds per epoch)."""
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    ranks = [spawn.Process(target=rank_main, args=(folder, start_method, r, args, results)) for r in range(args.ranks)]
    for process in ranks:
        process.start()
    timings = [results.get(timeout=600) for _ in ranks]
    for process in ranks:
        process.join()
        if process.exitcode:
            raise SystemExit(f"a rank failed (exit {process.exitcode})")
    return max(t[0] for t in timings), max(t[1] for t in timings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--images", type=int, default=256, help="training images (a quarter as many for val)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    timings: dict[str, list[tuple[float, float]]] = {name: [] for name in SIDES}
    with tempfile.TemporaryDirectory(prefix="bench-loader-start-") as tmp:
        folder = str(make_dataset_folder(tmp, num_classes=4, size=28, train=args.images, val=args.images // 4))
        for _ in range(args.repeats):
            for name, start_method in SIDES.items():
                timings[name].append(time_side(folder, start_method, args))
    print(
        f"\n{args.ranks} spawned ranks x {args.workers} loader workers, LeNet's loaders over {args.images} "
        f"28x28 training images and {args.images // 4} validation images, {args.epochs} epochs; "
        f"median of {args.repeats} turns, the slowest rank\n"
    )
    print("| loader workers started by | s to the first batch | s per epoch (train + validation) |")
    print("| --- | ---: | ---: |")
    medians = {}
    for name, runs in timings.items():
        medians[name] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
        print(f"| {name} | {medians[name][0]:.2f} | {medians[name][1]:.2f} |")
    fork, spawn = medians.values()
    print(f"\nspawn / fork: {spawn[0] / fork[0]:.1f}x to the first batch, {spawn[1] / fork[1]:.1f}x per epoch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
