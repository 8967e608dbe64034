"""A detection or segmentation sample's load and augmentation with its per-sample seed set by
`torch.manual_seed` (the baseline: it also seeds CUDA, lazily where CUDA is not up, formatting a
stack trace each call) against the trainer's `with_seed` (the CPU generator only), alternating in
one process on the same samples. Prints milliseconds per sample of both and their ratio.

    .venv/bin/python bench/bench_sample_seeding.py --rounds 6
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.task_data import make_task_folder  # noqa: E402
from trainer.config import config_from_dict  # noqa: E402
from trainer.dataset_folder import load_dataset_folder  # noqa: E402
from trainer.tasks import detection, segmentation, task_for  # noqa: E402
from trainer.tasks.base import with_seed  # noqa: E402

CASES = (
    ("segmentation", "lraspp_mobilenet_v3_large", segmentation),
    ("detection", "fasterrcnn_mobilenet_v3_large_320_fpn", detection),
)


def manual_seed_baseline(seed: int | None, apply: Callable[[], Any]) -> Any:
    if seed is None:
        return apply()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed % (1 << 63))
        return apply()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="passes over the samples, each side")
    parser.add_argument("--samples", type=int, default=64)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-seeding-"))
    try:
        print("| task | torch.manual_seed ms/sample | with_seed ms/sample | ratio |")
        print("| --- | ---: | ---: | ---: |")
        for task_name, network, module in CASES:
            folder = make_task_folder(root / task_name, task=task_name, size=64, train=args.samples, val=2)
            raw = {"run_dir": "unused", "network": network, "data": {"dataset": str(folder)}}
            cfg = config_from_dict(raw, check_paths=False)
            dataset = task_for(task_name).dataset(load_dataset_folder(folder), "train", cfg=cfg, train=True)
            seconds = {"baseline": 0.0, "ours": 0.0}
            for round_ in range(args.rounds):
                for side, seeding in (("baseline", manual_seed_baseline), ("ours", with_seed)):
                    module.with_seed = seeding  # the name the task's dataset calls
                    start = time.perf_counter()
                    for index in range(args.samples):
                        dataset[(index, round_ * args.samples + index)]
                    seconds[side] += time.perf_counter() - start
            module.with_seed = with_seed
            baseline, ours = (seconds[side] / (args.rounds * args.samples) * 1000 for side in ("baseline", "ours"))
            print(f"| {task_name} | {baseline:.3f} | {ours:.3f} | {baseline / ours:.2f}x |", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
