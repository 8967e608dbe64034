"""A recipe preset trained by the workbench's trainer against the same recipe trained the way
torchvision's reference `references/classification/train.py` trains it, on the same data, network,
batch, epochs and seed (issue 23: within 1 point of val top-1, at >= 1.0x its speed).

The reference scripts are not part of the installed torchvision, so its loop is written out here as
train.py runs it with the preset's flags: `ClassificationPresetTrain` per PIL image in the loader
(RandomResizedCrop, flip, TrivialAugmentWide, to float, Normalize, RandomErasing), mixup or cutmix
chosen per batch in the collate (`v2.RandomChoice([v2.MixUp, v2.CutMix])`), cross-entropy with label
smoothing, SGD with momentum, a linear warm-up then cosine stepped per epoch, and its weights'
average (`AveragedModel` every 32 steps, decay adjusted by batch, steps and epochs, reset during the
warm-up). Ours: `trainer.run.train` with the preset (`torchvision_resnet_v2`), the augmentations on
the uint8 batch on the device (the CPU here), timm's ModelEmaV3 for the average.

Data: scikit-learn's 1,797 real 8x8 digits, upscaled to RGB --side px, a fifth held out. The preset
is for ImageNet at 600 epochs and a batch of 1024; here its epochs are --epochs, its rate is scaled
with the batch as its note says (0.5 x batch / 1024), and its warm-up is one epoch on both sides.
Prints each side's raw and averaged val top-1 and training images/s per seed, and their means.

    .venv/bin/python bench/bench_preset_reference.py --epochs 12 --seeds 2

Run it on a quiet machine: both sides use every core.

`--recipe plain` compares a plain recipe instead (issue 33's "same recipe, two results"): no
preset, a fixed rate (SGD 0.1, momentum 0.9, weight decay 1e-4, no warm-up, no average, no label
smoothing), batch 32, RandomResizedCrop (scale 0.08-1) and flip with ImageNet's mean and std, or
with `--plain-augment flip` the flip alone; both sides print val top-1 and val loss after every
epoch. The reference evaluates the whole 32 px image, as ours does.

    .venv/bin/python bench/bench_preset_reference.py --recipe plain --epochs 3 --seeds 2
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn
from torchvision import models, transforms
from torchvision.transforms import v2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.trainer_data import write_dataset_folder  # noqa: E402
from trainer.config import SolverConfig, config_from_dict  # noqa: E402
from trainer.events import ListReporter  # noqa: E402
from trainer.recipes import preset_values  # noqa: E402
from trainer.run import train  # noqa: E402
from trainer.solver import lr_at  # noqa: E402

PRESET = "torchvision_resnet_v2"
NETWORK = "resnet18"
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
EMA_STEPS = 32  # train.py's --model-ema-steps default


def digits(side: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The digits as N x side x side x 3 uint8 and labels, split train/val by a fixed permutation."""
    from sklearn.datasets import load_digits  # scikit-learn: only the bench's data needs it

    data = load_digits()
    images = torch.from_numpy(data.images * 16).float()[:, None]  # 0..16 -> 0..256
    images = nn.functional.interpolate(images, size=(side, side), mode="bilinear", align_corners=False)
    images = images.clamp(0, 255).round().to(torch.uint8).repeat(1, 3, 1, 1).permute(0, 2, 3, 1).numpy()
    order = np.random.default_rng(0).permutation(len(images))
    held = len(images) // 5
    ys = data.target.astype(np.int64)
    return {"train": (images[order[held:]], ys[order[held:]]), "val": (images[order[:held]], ys[order[:held]])}


def recipe(args) -> tuple[dict, dict]:
    """The preset's solver and data fields at the bench's budget (both sides read these)."""
    preset = preset_values(PRESET)
    solver = {**preset["solver"], "base_lr": 0.5 * args.batch / 1024, "warmup_percent": 100 / args.epochs}
    return solver, dict(preset["data"])


def ours(folder: Path, run_dir: Path, args, *, seed: int, train_count: int) -> dict:
    solver, data = recipe(args)
    cfg = config_from_dict(
        {
            "run_dir": str(run_dir),
            "network": NETWORK,
            "epochs": args.epochs,
            "batch_size": args.batch,
            "devices": ["cpu"],
            "seed": seed,
            "val_interval": args.epochs,
            "snapshot_interval": 0,
            "metrics_interval": 1,
            "solver": solver,
            "data": {
                **data,
                "dataset": str(folder),
                "num_workers": args.workers,
                "norm_mean": list(MEAN),
                "norm_std": list(STD),
            },
        }
    )
    reporter = ListReporter()
    if train(cfg, reporter=reporter) != 0:
        raise SystemExit(f"the trainer failed: {reporter.of_type('status')[-1:]}")
    steps_per_epoch = math.ceil(train_count / args.batch)
    # The first epoch warms up both sides alike (allocator, loader workers starting); the steps'
    # rates are averaged harmonically: the total images over the total time, as the reference's.
    speeds = [event["images_per_sec"] for event in reporter.of_type("metrics")[steps_per_epoch:]]
    validation = reporter.of_type("validation")[-1]
    rate = len(speeds) / sum(1 / speed for speed in speeds)
    return {"top1": validation["top1"], "ema_top1": validation["ema_top1"], "images_per_sec": rate}


class Digits(torch.utils.data.Dataset):
    def __init__(self, images: np.ndarray, ys: np.ndarray, transform) -> None:
        self.images, self.ys, self.transform = [Image.fromarray(image) for image in images], ys, transform

    def __len__(self) -> int:
        return len(self.ys)

    def __getitem__(self, index: int):
        return self.transform(self.images[index]), int(self.ys[index])


def reference_loaders(split: dict, args, data: dict, classes: int):
    """train.py's loaders: ClassificationPresetTrain / Eval (presets.py) and its mixup/cutmix collate."""
    side = args.side
    train_steps = [transforms.RandomResizedCrop(side, antialias=True)]
    if data.get("random_flip"):
        train_steps.append(transforms.RandomHorizontalFlip(0.5))
    train_steps += [
        transforms.TrivialAugmentWide(interpolation=transforms.InterpolationMode.BILINEAR),
        transforms.PILToTensor(),
        transforms.ConvertImageDtype(torch.float),
        transforms.Normalize(MEAN, STD),
        transforms.RandomErasing(p=data["random_erasing"]),
    ]
    evaluate = transforms.Compose([transforms.Resize(side, antialias=True), transforms.CenterCrop(side),
                                   transforms.PILToTensor(), transforms.ConvertImageDtype(torch.float),
                                   transforms.Normalize(MEAN, STD)])  # fmt: skip
    mix = v2.RandomChoice(
        [
            v2.MixUp(alpha=data["mixup_alpha"], num_classes=classes),
            v2.CutMix(alpha=data["cutmix_alpha"], num_classes=classes),
        ]
    )

    def collate(batch):
        return mix(*torch.utils.data.default_collate(batch))

    train_set = Digits(*split["train"], transforms.Compose(train_steps))
    loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                                         collate_fn=collate, persistent_workers=args.workers > 0)  # fmt: skip
    val = torch.utils.data.DataLoader(Digits(*split["val"], evaluate), batch_size=256, num_workers=0)
    return loader, val


def top1(model: nn.Module, loader) -> float:
    model.eval()
    right = total = 0
    with torch.inference_mode():
        for x, y in loader:
            right += int((model(x).argmax(1) == y).sum())
            total += len(y)
    return right / total


def reference(split: dict, args, seed: int) -> dict:
    """train.py's main loop with the preset's flags, one process on the CPU."""
    solver, data = recipe(args)
    classes = 10
    torch.manual_seed(seed)
    loader, val = reference_loaders(split, args, data, classes)
    model = models.resnet18(num_classes=classes)
    criterion = nn.CrossEntropyLoss(label_smoothing=solver["label_smoothing"])
    optimizer = torch.optim.SGD(model.parameters(), lr=solver["base_lr"], momentum=solver["momentum"],
                                weight_decay=solver["weight_decay"])  # fmt: skip
    warmup_epochs = 1
    per_epoch = per_step = None
    if args.reference_schedule == "train.py":
        per_epoch = torch.optim.lr_scheduler.SequentialLR(
            optimizer,
            [torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=warmup_epochs),
             torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs - warmup_epochs)],
            milestones=[warmup_epochs],
        )  # fmt: skip
    else:
        # The trainer's steps in train.py's loop: whole batches only, and its rate per step (linear
        # warm-up, cosine to 0), to see whether the two schedules make the accuracy gap.
        steps = args.epochs * (len(split["train"][1]) // args.batch)
        rates = SolverConfig(**solver)
        per_step = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: lr_at(rates, i, steps) / rates.base_lr)
    # train.py's ExponentialMovingAverage: its decay adjusted to the batch, the update interval and
    # the epochs (adjust = world_size * batch_size * model_ema_steps / epochs).
    alpha = min(1.0, (1.0 - solver["ema_decay"]) * args.batch * EMA_STEPS / args.epochs)
    decay = 1.0 - alpha
    ema = torch.optim.swa_utils.AveragedModel(
        model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(decay), use_buffers=True
    )
    images, seconds = 0, 0.0
    for epoch in range(args.epochs):
        model.train()
        started = time.perf_counter()
        for step, (x, y) in enumerate(loader):
            if per_step is not None and len(x) < args.batch:
                continue  # the trainer drops each epoch's incomplete last batch
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if per_step is not None:
                per_step.step()
            if step % EMA_STEPS == 0:
                ema.update_parameters(model)
                if epoch < warmup_epochs:
                    ema.n_averaged.fill_(0)  # the average starts after the warm-up (train.py)
            if epoch:
                images += len(x)
        if per_epoch is not None:
            per_epoch.step()
        if epoch:
            seconds += time.perf_counter() - started
    return {"top1": top1(model, val), "ema_top1": top1(ema.module, val), "images_per_sec": images / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--side", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2, help="loader worker processes, both sides")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument(
        "--reference-schedule",
        choices=("train.py", "ours"),
        default="train.py",
        help="ours: the reference loop takes the trainer's whole batches and per-step rate instead of train.py's",
    )
    parser.add_argument("--recipe", choices=("preset", "plain"), default="preset")
    parser.add_argument("--plain-augment", choices=("rrc", "flip"), default="rrc")
    args = parser.parse_args()
    split = digits(args.side)
    if args.recipe == "plain":
        plain_comparison(split, args)
        return
    root = Path(tempfile.mkdtemp(prefix="bench-preset-"))
    reference_name = (
        "reference (train.py's loop)" if args.reference_schedule == "train.py" else "reference, ours' schedule"
    )
    rows = {"ours (trainer, preset)": [], reference_name: []}
    try:
        folder = write_dataset_folder(root / "digits", split, [str(d) for d in range(10)], name="digits")
        for seed in range(args.seeds):
            rows["ours (trainer, preset)"].append(
                ours(folder, root / f"run-{seed}", args, seed=seed, train_count=len(split["train"][1]))
            )
            rows[reference_name].append(reference(split, args, seed))
            for name, results in rows.items():
                print(f"seed {seed} {name}: {results[-1]}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{NETWORK} on {len(split['train'][1])} digits at {args.side}x{args.side}, {len(split['val'][1])} held "
          f"out; preset {PRESET}, {args.epochs} epochs, batch {args.batch}, {args.seeds} seeds\n")  # fmt: skip
    print("| side | val top-1 (raw weights) | val top-1 (average) | training images/s |")
    print("| --- | ---: | ---: | ---: |")
    means = {}
    for name, results in rows.items():
        means[name] = {key: float(np.mean([r[key] for r in results])) for key in results[0]}
        m = means[name]
        print(f"| {name} | {m['top1']:.3f} | {m['ema_top1']:.3f} | {m['images_per_sec']:.1f} |")
    ours_m, ref_m = means.values()
    print(f"\nraw top-1: ours - reference = {100 * (ours_m['top1'] - ref_m['top1']):+.1f} points; "
          f"speed ratio {ours_m['images_per_sec'] / ref_m['images_per_sec']:.2f}x")  # fmt: skip


PLAIN_SOLVER = {"optimizer": "sgd", "base_lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4, "lr_policy": "fixed"}
PLAIN_BATCH = 32  # train.py's default


def plain_ours(folder: Path, run_dir: Path, args, *, seed: int) -> list[tuple[float, float]]:
    """The trainer with the plain recipe: (val top-1, val loss) after each epoch."""
    data = {
        "dataset": str(folder),
        "num_workers": 0,
        "random_flip": True,
        "norm_mean": list(MEAN),
        "norm_std": list(STD),
    }
    data["random_resized_crop"] = args.plain_augment == "rrc"
    fields = {"run_dir": str(run_dir), "network": NETWORK, "epochs": args.epochs, "batch_size": PLAIN_BATCH,
              "devices": ["cpu"], "seed": seed, "val_interval": 1, "snapshot_interval": 0}  # fmt: skip
    cfg = config_from_dict({**fields, "solver": PLAIN_SOLVER, "data": data})
    reporter = ListReporter()
    if train(cfg, reporter=reporter) != 0:
        raise SystemExit(f"the trainer failed: {reporter.of_type('status')[-1:]}")
    return [(event["top1"], event["val_loss"]) for event in reporter.of_type("validation")]


def plain_reference(split: dict, args, *, seed: int) -> list[tuple[float, float]]:
    """train.py's loop with the plain recipe's flags, evaluated after each epoch as ours is."""
    torch.manual_seed(seed)
    crop = [transforms.RandomResizedCrop(args.side, antialias=True)] if args.plain_augment == "rrc" else []
    to_input = [transforms.PILToTensor(), transforms.ConvertImageDtype(torch.float), transforms.Normalize(MEAN, STD)]
    train_set = Digits(*split["train"], transforms.Compose([*crop, transforms.RandomHorizontalFlip(0.5), *to_input]))
    loader = torch.utils.data.DataLoader(train_set, batch_size=PLAIN_BATCH, shuffle=True)
    val = torch.utils.data.DataLoader(Digits(*split["val"], transforms.Compose(to_input)), batch_size=256)
    model = models.resnet18(num_classes=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=PLAIN_SOLVER["base_lr"], momentum=PLAIN_SOLVER["momentum"],
                                weight_decay=PLAIN_SOLVER["weight_decay"])  # fmt: skip
    epochs = []
    for _ in range(args.epochs):
        model.train()
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        right, loss_sum, total = 0, 0.0, 0
        with torch.inference_mode():
            for x, y in val:
                logits = model(x)
                loss_sum += float(nn.functional.cross_entropy(logits, y, reduction="sum"))
                right, total = right + int((logits.argmax(1) == y).sum()), total + len(y)
        epochs.append((right / total, loss_sum / total))
    return epochs


def plain_comparison(split: dict, args) -> None:
    """Both sides of the plain recipe, seed by seed, with each epoch's val top-1 and val loss."""
    root = Path(tempfile.mkdtemp(prefix="bench-plain-"))
    try:
        folder = write_dataset_folder(root / "digits", split, [str(d) for d in range(10)], name="digits")
        finals = {"ours": [], "reference": []}
        for seed in range(args.seeds):
            for side, epochs in (("ours", plain_ours(folder, root / f"run-{seed}", args, seed=seed)),
                                 ("reference", plain_reference(split, args, seed=seed))):  # fmt: skip
                finals[side].append(epochs[-1][0])
                shown = ", ".join(f"{top1:.3f} (loss {loss:.3g})" for top1, loss in epochs)
                print(f"seed {seed} {side}: val top-1 by epoch: {shown}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    means = {side: float(np.mean(values)) for side, values in finals.items()}
    print(f"\nplain recipe ({args.plain_augment}), {args.epochs} epochs, batch {PLAIN_BATCH}, mean of {args.seeds} "
          f"seeds: final val top-1 ours {means['ours']:.3f}, reference {means['reference']:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
