"""Fine-tuning vs training from scratch on a small dataset, with the same budget (issue 23).

No weights can be downloaded here, so the "pretrained" weights are made the way a lab makes its
own: a ResNet-18 is trained by the workbench's trainer on a source dataset (scikit-learn's real
8x8 digits 0-5, every image, upscaled to RGB 16x16), its weights are filed through the weights
store (`manage.py weights import FILE --network resnet18`: checked, filed as local, unverified)
and resolved from `weights:<id>` as a run's config is. The target is the other digits (6-9) with
only --per-class training images per class; the rest of them are the validation set. Both target
runs use the "fine-tune a small dataset" preset (same epochs, batch, solver, augmentations, seed);
only `pretrained` (and the fine-tuning fields it allows) differ. A third run trains from scratch
and a fourth fine-tunes at a rate chosen for scratch (--scratch-lr, cosine), so the comparison
does not rest on the preset's low rate alone. Two controls explain a negative gain: fine-tuning
from the from-scratch run's own weights (the loading path: it must not lose accuracy) and linear
probes of the frozen features, pretrained against a random start (what the source's features
are worth to the target before any training).
Prints a markdown table of val top-1 per seed (a seed draws the training images and the
initialisation), their means and the gain.

    nice -n 10 .venv/bin/python bench/bench_finetune.py --side 16 --per-class 20 --seeds 2

Run it on a quiet machine: every run uses every core.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.trainer_data import write_dataset_folder  # noqa: E402
from trainer.checkpoint import CheckpointStore  # noqa: E402
from trainer.config import config_from_dict  # noqa: E402
from trainer.events import ListReporter  # noqa: E402
from trainer.networks import InputSpec, build_model  # noqa: E402
from trainer.recipes import preset_values  # noqa: E402
from trainer.run import train  # noqa: E402

NETWORK = "resnet18"
SOURCE_DIGITS = range(0, 6)
TARGET_DIGITS = range(6, 10)
# The table's rows that its gains and controls are computed from.
FINE_TUNED = "fine-tuned from weights:<id>"
SCRATCH = "from scratch, same recipe"
OWN_WEIGHTS = "control: fine-tuned from the from-scratch run's own weights"
PROBE_PRETRAINED = "linear probe of the pretrained features"
PROBE_RANDOM = "linear probe of random-start features"


def digits_rgb(side: int) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1,797 real digits, 8x8 upscaled (bilinear) to side x side, grey as RGB: the
    store checks a file against the network's 3-channel stem, as published weights have."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = torch.from_numpy(digits.images * 16).float()[:, None]  # 0..16 -> 0..256
    images = torch.nn.functional.interpolate(images, size=(side, side), mode="bilinear", align_corners=False)
    images = images.clamp(0, 255).round().to(torch.uint8).repeat(1, 3, 1, 1).permute(0, 2, 3, 1)
    return images.numpy(), digits.target.astype(np.int64)


def source_folder(path: Path, images: np.ndarray, ys: np.ndarray) -> Path:
    keep = np.isin(ys, list(SOURCE_DIGITS))
    images, ys = images[keep], ys[keep]
    order = np.random.default_rng(0).permutation(len(ys))
    n_val = len(ys) // 10
    splits = {"train": (images[order[n_val:]], ys[order[n_val:]]), "val": (images[order[:n_val]], ys[order[:n_val]])}
    return write_dataset_folder(path, splits, [str(d) for d in SOURCE_DIGITS], name="digits 0-5")


def target_split(ys: np.ndarray, *, per_class: int, seed: int) -> tuple[list[int], list[int]]:
    """Digits 6-9: `per_class` training images of each (drawn by the seed), the rest for validation."""
    rng = np.random.default_rng(1000 + seed)
    train_idx, val_idx = [], []
    for label in TARGET_DIGITS:
        idx = rng.permutation(np.flatnonzero(ys == label))
        train_idx += idx[:per_class].tolist()
        val_idx += idx[per_class:].tolist()
    return train_idx, val_idx


def target_folder(path: Path, images: np.ndarray, ys: np.ndarray, split: tuple[list[int], list[int]]) -> Path:
    """The target split's images as a dataset folder, digits 6-9 relabelled 0-3."""
    train_idx, val_idx = split
    labels = ys - TARGET_DIGITS[0]
    splits = {"train": (images[train_idx], labels[train_idx]), "val": (images[val_idx], labels[val_idx])}
    return write_dataset_folder(path, splits, [str(d) for d in TARGET_DIGITS], name="digits 6-9")


def linear_probe(weights: Path | None, images: np.ndarray, ys: np.ndarray, split: tuple[list[int], list[int]]) -> float:
    """Val accuracy of a logistic regression on the network's frozen penultimate features of the
    target split (no augmentation, pixels scaled as the trainer does with mean_subtraction none):
    how well the features alone separate digits 6-9, from `weights` or a seeded random start."""
    from sklearn.linear_model import LogisticRegression  # scikit-learn: the test extras, loaded where used

    torch.manual_seed(0)
    side = images.shape[1]
    model = build_model(NETWORK, InputSpec(channels=3, height=side, width=side, num_classes=len(SOURCE_DIGITS)))
    if weights is not None:
        model.load_state_dict(torch.load(weights, weights_only=True))
    model.fc = torch.nn.Identity()  # the penultimate features: what fine-tuning starts from
    pixels = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255
    with torch.no_grad():
        features = model.eval()(pixels).numpy()
    train_idx, val_idx = split
    probe = LogisticRegression(max_iter=5000).fit(features[train_idx], ys[train_idx])
    return float(probe.score(features[val_idx], ys[val_idx]))


def run_trainer(config: dict) -> tuple[float, float]:
    """Trains `config`; returns (final val top-1, wall seconds)."""
    reporter = ListReporter()
    started = time.perf_counter()
    code = train(config_from_dict(config), reporter=reporter)
    seconds = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"the trainer failed (exit {code}): {reporter.of_type('status')[-1:]}")
    return reporter.of_type("validation")[-1]["top1"], seconds


def pretrain(folder: Path, run_dir: Path, args) -> tuple[Path, float, float]:
    """The lab's own pretraining on the source digits; returns its weights file (a state_dict, as
    a lab would copy it to the workbench machine), its val top-1 and its seconds."""
    top1, seconds = run_trainer(
        {
            "run_dir": str(run_dir),
            "network": NETWORK,
            "epochs": args.pretrain_epochs,
            "batch_size": 64,
            "devices": ["cpu"],
            "val_interval": 0,
            "snapshot_interval": 0,
            "data": {
                "dataset": str(folder),
                "num_workers": 0,
                "mean_subtraction": "none",
                "random_resized_crop": True,
                "rrc_scale": [0.5, 1.0],
            },
            "solver": {
                "optimizer": "sgd",
                "base_lr": 0.05,
                "momentum": 0.9,
                "weight_decay": 5e-4,
                "lr_policy": "cosine",
            },
        }
    )
    checkpoint = CheckpointStore(run_dir).latest()
    weights = run_dir / "lab-digits-0-5.pth"
    torch.save(CheckpointStore.load(checkpoint)["model"], weights)
    return weights, top1, seconds


def file_in_store(weights: Path) -> str:
    """`manage.py weights import FILE --network resnet18`, then the file a run's `weights:<id>`
    resolves to (workbench.weights.references.reference_path), as a run submitted by a user gets."""
    data_dir = tempfile.mkdtemp(prefix="bench-")
    os.environ.update(DJANGO_SETTINGS_MODULE="workbench.settings", WORKBENCH_DATA_DIR=data_dir)
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from workbench.weights.models import StoredWeights
    from workbench.weights.references import reference_path

    call_command("migrate", verbosity=0)
    call_command("weights", "import", str(weights), "--network", NETWORK, "--tag", "lab-digits-0-5")
    stored = StoredWeights.objects.get(network=NETWORK)
    print(f"store: {stored.reference} {stored.label}, verified={stored.verified}, {stored.tensor_count} tensors")
    user = get_user_model().objects.create_user("bench")
    run_dir = Path(data_dir) / "run"  # where a run: reference's weights would be copied; weights: reads in place
    return str(reference_path(stored.reference, owner=user, network=NETWORK, run_dir=run_dir))


def target_config(folder: Path, run_dir: Path, args, *, seed: int, pretrained: str | None, lr: float | None) -> dict:
    """The preset's recipe at the bench's budget; `lr` replaces the preset's solver (cosine)."""
    preset = preset_values("finetune_small")
    solver = dict(preset["solver"])
    if lr is not None:
        solver = {"optimizer": "sgd", "base_lr": lr, "momentum": 0.9, "weight_decay": 5e-4, "lr_policy": "cosine"}
    config = {
        "run_dir": str(run_dir),
        "network": NETWORK,
        "epochs": args.epochs,
        "batch_size": args.batch,
        "devices": ["cpu"],
        "seed": seed,
        "val_interval": 0,
        "snapshot_interval": 0,
        "solver": solver,
        # Digits are not mirror images of themselves: the preset's flip is left off, for both.
        "data": {
            **preset["data"],
            "random_flip": False,
            "rrc_scale": [0.5, 1.0],
            "dataset": str(folder),
            "num_workers": 0,
            "mean_subtraction": "none",
        },
    }
    if pretrained:
        config |= {"pretrained": pretrained, "backbone_lr_mult": args.backbone_lr_mult}
    return config


def run_seed(
    root: Path, images: np.ndarray, ys: np.ndarray, seed: int, pretrained: str, args
) -> dict[str, tuple[float, float]]:
    """One seed's rows: name -> (val top-1, train seconds). Beside the fine-tuning rows, two
    controls: the loading path fine-tunes the from-scratch run's own weights (its head kept, the
    same classes) and must not lose accuracy; the linear probes say how well the frozen features
    alone, pretrained or random, separate the target."""
    split = target_split(ys, per_class=args.per_class, seed=seed)
    folder = target_folder(root / f"target{seed}", images, ys, split)
    # name -> (pretrained file or None, the rate replacing the preset's solver or None)
    plans = {FINE_TUNED: (pretrained, None), SCRATCH: (None, None)}
    if args.scratch_lr:
        plans[f"from scratch, base_lr {args.scratch_lr:g} cosine"] = (None, args.scratch_lr)
        plans[f"fine-tuned, base_lr {args.scratch_lr:g} cosine"] = (pretrained, args.scratch_lr)
    own = root / f"own{seed}.pth"
    plans[OWN_WEIGHTS] = (str(own), None)
    rows = {}
    for number, (name, (start, lr)) in enumerate(plans.items()):
        run_dir = root / f"run{seed}-{number}"
        rows[name] = run_trainer(target_config(folder, run_dir, args, seed=seed, pretrained=start, lr=lr))
        if name == SCRATCH:
            torch.save(CheckpointStore.load(CheckpointStore(run_dir).latest())["model"], own)
        print(f"seed {seed}: {name}: val top-1 {rows[name][0]:.3f} ({rows[name][1]:.0f} s)", flush=True)
    rows[PROBE_PRETRAINED] = (linear_probe(Path(pretrained), images, ys, split), 0.0)
    rows[PROBE_RANDOM] = (linear_probe(None, images, ys, split), 0.0)
    return rows


def print_table(
    rows: dict[str, list[float]], seconds: dict[str, float], args, *, source_top1: float, val_count: int
) -> None:
    print(
        f"\n{NETWORK} 3x{args.side}x{args.side}; target digits 6-9, {args.per_class} training images per class, "
        f"{val_count} validation images; {args.epochs:g} epochs, batch {args.batch}, preset finetune_small "
        f"(no flip, RandomResizedCrop scale 0.5-1); pretrained {args.pretrain_epochs:g} epochs on digits 0-5 "
        f"(val top-1 {source_top1:.3f})\n"
    )
    seed_columns = " | ".join(f"seed {s}" for s in range(args.seeds))
    print(f"| start | {seed_columns} | mean val top-1 | train s (all seeds) |")
    print("| --- | " + " | ".join("---:" for _ in range(args.seeds)) + " | ---: | ---: |")
    for name, values in rows.items():
        cells = " | ".join(f"{v:.3f}" for v in values)
        spent = f"{seconds[name]:.0f}" if seconds[name] else "-"  # a probe trains no network
        print(f"| {name} | {cells} | **{np.mean(values):.3f}** | {spent} |")
    means = {name: float(np.mean(values)) for name, values in rows.items()}
    fine, scratch = means[FINE_TUNED], means[SCRATCH]
    print(f"\ngain (fine-tuned - from scratch, same recipe): {100 * (fine - scratch):+.1f} points")
    if args.scratch_lr:
        rate = f"base_lr {args.scratch_lr:g} cosine"
        at_rate = 100 * (means[f"fine-tuned, {rate}"] - means[f"from scratch, {rate}"])
        print(f"gain at {rate} (fine-tuned - from scratch): {at_rate:+.1f} points")
    own = means[OWN_WEIGHTS]
    print(f"control, the loading path (own weights - from scratch): {100 * (own - scratch):+.1f} points")
    probes = means[PROBE_PRETRAINED] - means[PROBE_RANDOM]
    print(f"the features alone (probe of pretrained - probe of random): {100 * probes:+.1f} points")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--side", type=int, default=16, help="image side after upscaling the 8x8 digits")
    parser.add_argument("--per-class", type=int, default=20, help="target training images per class")
    parser.add_argument("--pretrain-epochs", type=float, default=6)
    parser.add_argument("--epochs", type=float, default=25, help="target epochs (the preset's 25)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--backbone-lr-mult", type=float, default=1.0)
    parser.add_argument("--scratch-lr", type=float, default=0.05, help="the cosine rows' rate (0: no such rows)")
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    logging.getLogger("trainer").setLevel(logging.WARNING)

    images, ys = digits_rgb(args.side)
    rows: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-finetune-") as tmp:
        root = Path(tmp)
        source = source_folder(root / "source", images, ys)
        weights, source_top1, source_s = pretrain(source, root / "pretrain", args)
        print(f"pretrained {NETWORK} on digits 0-5: val top-1 {source_top1:.3f} in {source_s:.0f} s")
        pretrained = file_in_store(weights)
        for seed in range(args.seeds):
            for name, (top1, spent) in run_seed(root, images, ys, seed, pretrained, args).items():
                rows.setdefault(name, []).append(top1)
                seconds[name] = seconds.get(name, 0.0) + spent
    val_count = int((~np.isin(ys, list(SOURCE_DIGITS))).sum()) - 4 * args.per_class
    print_table(rows, seconds, args, source_top1=source_top1, val_count=val_count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
