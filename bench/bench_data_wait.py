"""The data-wait share of a ResNet-50 training step at 224 on the CPU, with the full recipe on
(torchvision's ResNet v2 preset: RandomResizedCrop, TrivialAugment, random erasing, mixup/cutmix,
label smoothing, EMA) against the same run without it (a centre-free random crop and a flip in the
loader only), side by side in one process. Prints each side's images/s, step time and the share of
wall time the step waited for its batch, and the ratio of the step times.

    .venv/bin/python bench/bench_data_wait.py --steps 12 --batch 16 --workers 2

The trainer runs the recipe's augmentations on the training device, on the uint8 batch
(trainer/augment.py): on a GPU host they leave the loader's CPU workers alone; here the device is
the CPU, so their cost shows in the step time, not in the wait. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.trainer_data import make_dataset_folder  # noqa: E402
from trainer.config import config_from_dict  # noqa: E402
from trainer.events import ListReporter  # noqa: E402
from trainer.run import train  # noqa: E402


def measure(folder: Path, run_dir: Path, args, *, recipe: bool) -> dict[str, float]:
    raw = {
        "run_dir": str(run_dir),
        "network": "resnet50",
        "epochs": 1,
        "batch_size": args.batch,
        "devices": ["cpu"],
        "metrics_interval": args.interval,
        "val_interval": 0,
        "snapshot_interval": 0,
        "data": {"dataset": str(folder), "num_workers": args.workers, "crop_size": 224, "random_flip": True},
        "solver": {"optimizer": "sgd", "base_lr": 0.01, "momentum": 0.9},
    }
    if recipe:
        raw["preset"] = "torchvision_resnet_v2"
    reporter = ListReporter()
    train(config_from_dict(raw), reporter=reporter)
    # The first interval holds the loader's start and the first steps' warm-up: left out.
    later = reporter.of_type("metrics")[1:]
    if not later:
        raise SystemExit("too few steps: raise --steps or lower --interval")
    speed = sum(m["images_per_sec"] for m in later) / len(later)
    wait = sum(m["data_wait_share"] for m in later) / len(later)
    return {"images_per_sec": speed, "step_s": args.batch / speed, "data_wait_share": wait}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12, help="training steps a side")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2, help="the loader's worker processes")
    parser.add_argument("--interval", type=int, default=4, help="steps per metrics event")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-data-wait-"))
    try:
        folder = make_dataset_folder(
            work / "data", num_classes=10, size=256, channels=3, train=args.steps * args.batch, val=10
        )
        rows = {
            "without the recipe (loader crop and flip)": measure(folder, work / "plain", args, recipe=False),
            "torchvision_resnet_v2 preset (on the device)": measure(folder, work / "recipe", args, recipe=True),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"ResNet-50, 224 px, batch {args.batch}, {args.workers} loader workers, {args.steps} steps a side, CPU")
    print("| run | images/s | step s | data-wait share |")
    print("| --- | ---: | ---: | ---: |")
    for name, row in rows.items():
        print(f"| {name} | {row['images_per_sec']:.2f} | {row['step_s']:.2f} | {row['data_wait_share']:.1%} |")
    plain, recipe = rows.values()
    print(f"recipe step time / plain step time: {recipe['step_s'] / plain['step_s']:.2f}x")


if __name__ == "__main__":
    main()
