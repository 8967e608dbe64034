"""Detection and segmentation on the CPU: the workbench's trainer against torchvision's reference
training loop (references/detection and references/segmentation: `train_one_epoch`, a plain loop
of forward with targets, summed losses, backward, SGD step), on the same drawn shapes, the same
network, batch and number of steps. Prints training images/s of both and their ratio, and the
metric the trainer reached (mAP50 for the detector, mIoU for the segmentation network).

    .venv/bin/python bench/bench_tasks.py --epochs 30 --train 64 --size 96

Run it on a quiet machine: both sides use every core.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.task_data import make_task_folder  # noqa: E402
from trainer.config import config_from_dict  # noqa: E402
from trainer.dataset_folder import load_dataset_folder  # noqa: E402
from trainer.events import ListReporter  # noqa: E402
from trainer.networks import InputSpec  # noqa: E402
from trainer.run import train  # noqa: E402
from trainer.tasks import task_for  # noqa: E402
from trainer.tasks.base import as_rgb  # noqa: E402

CASES = (
    ("detection", "fasterrcnn_mobilenet_v3_large_320_fpn", "map_50"),
    ("segmentation", "lraspp_mobilenet_v3_large", "miou"),
)


def ours(folder: Path, run_dir: Path, network: str, args) -> tuple[float, dict]:
    cfg = config_from_dict(
        {
            "run_dir": str(run_dir),
            "network": network,
            "epochs": args.epochs,
            "batch_size": args.batch,
            "devices": ["cpu"],
            "metrics_interval": 1,
            "val_interval": args.epochs,
            # No snapshot each epoch: the references time train_one_epoch alone, and save theirs
            # after it; one epoch here is 8 quick steps, so a save would weigh on ours alone.
            "snapshot_interval": 0,
            "data": {"dataset": str(folder), "num_workers": 0, "mean_subtraction": "none"},
            "solver": {"optimizer": "sgd", "base_lr": args.lr, "momentum": 0.9, "lr_policy": "cosine"},
        }
    )
    reporter = ListReporter()
    train(cfg, reporter=reporter)
    # One event a step, each the images/s of its step: the first epoch is left out as the
    # reference's is, and the rest are averaged harmonically, which is the total images over the
    # total time (the arithmetic mean of rates would favour the fast steps).
    speeds = [event["images_per_sec"] for event in reporter.of_type("metrics")[args.train // args.batch :]]
    (validation,) = reporter.of_type("validation")[-1:] or [{}]
    return len(speeds) / max(1e-9, sum(1 / speed for speed in speeds)), validation


def reference(folder: Path, task_name: str, network: str, args) -> float:
    """torchvision's references loop, as `train_one_epoch` writes it, on the same data."""
    info = load_dataset_folder(folder)
    task = task_for(task_name)
    cfg = config_from_dict(
        {"run_dir": "unused", "network": network, "data": {"dataset": str(folder)}}, check_paths=False
    )
    dataset = task.dataset(info, "train", cfg=cfg, train=True)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True, drop_last=True,
                                         collate_fn=task.collate)  # fmt: skip
    torch.manual_seed(0)
    model = task.build_model(network, InputSpec(3, info.image_height, info.image_width, info.num_classes))
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    normalize = task.normalize(info, cfg)
    # references/detection's train_one_epoch warms the rate up over the first epoch (1/1000 to 1);
    # without it, a detector from scratch at this rate can diverge and slow to a crawl.
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1e-3, total_iters=min(1000, len(loader) - 1))
    images, seconds = 0, 0.0
    for epoch in range(args.epochs):
        start = time.perf_counter()
        for batch, targets in loader:
            x = normalize(batch)
            if task_name == "detection":
                kept = [{"boxes": t["boxes"][~t["ignore"]], "labels": t["labels"][~t["ignore"]] + 1} for t in targets]
                loss = sum(model(list(as_rgb(x)), kept).values())
            else:
                loss = torch.nn.functional.cross_entropy(model(x)["out"], targets.long(), ignore_index=255)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if epoch == 0 and task_name == "detection":  # references/segmentation has no warmup by default
                warmup.step()
            images += len(batch)
        if epoch:  # the first epoch warms up both sides alike
            seconds += time.perf_counter() - start
        else:
            images = 0
    return images / max(seconds, 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--train", type=int, default=64)
    parser.add_argument("--val", type=int, default=32)
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--tasks", default="detection,segmentation", help="which of the cases to run")
    parser.add_argument("--reference-first", action="store_true", help="run the reference loop before ours")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-tasks-"))
    try:
        print(f"| task | network | ours images/s | reference loop images/s | ratio | ours after {args.epochs} epochs |")
        print("| --- | --- | --- | --- | --- | --- |", flush=True)
        for task_name, network, metric in CASES:
            if task_name not in args.tasks.split(","):
                continue
            folder = make_task_folder(root / task_name, task=task_name, size=args.size, train=args.train, val=args.val)
            # Both sides in one process: the one that runs second finds the allocator and caches warm,
            # so --reference-first swaps the order to show whether that, not the loop, is a gap.
            if args.reference_first:
                baseline = reference(folder, task_name, network, args)
            speed, validation = ours(folder, root / f"{task_name}-run", network, args)
            if not args.reference_first:
                baseline = reference(folder, task_name, network, args)
            reached = f"{metric} {validation.get(metric, float('nan')):.3f}"
            print(
                f"| {task_name} | {network} | {speed:.1f} | {baseline:.1f} | {speed / baseline:.2f}x | {reached} |",
                flush=True,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
