"""Training recipes: the choices of the train-time augmentations and the presets, each with its
source. Plain data: the web form, the API, the CLI and the trainer's config read the one table
(a preset fills the config fields it names; fields a request sends win over it).

The augmentations themselves are trainer/augment.py (torchvision.transforms.v2 on the device).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainer.protocol import TASK_TRAITS

AUTO_AUGMENTS = ("none", "trivialaugment", "randaugment", "autoaugment")

# Where each augmentation runs, as the form says it: the loader's workers decode and cut crops on
# the CPU; the rest runs on the training device, on the whole uint8 batch (trainer/augment.py),
# so a GPU host with few CPU cores is not bound by its loader.
WHERE = {
    "crop_size": "runs in the loader (CPU workers); with random resized crop, on the device",
    "random_flip": "runs in the loader (CPU workers)",
    "vertical_flip": "runs in the loader (CPU workers)",
    "random_resized_crop": "runs on the device, on the uint8 batch",
    "auto_augment": "runs on the device, on the uint8 batch",
    "color_jitter": "runs on the device, on the uint8 batch",
    "random_erasing": "runs on the device, on the normalised batch",
    "mixup_alpha": "runs on the device, on the normalised batch and its labels",
    "cutmix_alpha": "runs on the device, on the normalised batch and its labels",
    "label_smoothing": "applied in the loss",
}


# name -> {"label", "source", "note", "config"}; "config" is nested as the trainer config is.
PRESETS: dict[str, dict[str, Any]] = {
    "torchvision_resnet_v2": {
        "label": "torchvision ResNet v2 recipe",
        "source": "https://github.com/pytorch/vision/tree/main/references/classification#resnet "
        "(the recipe of ResNet50_Weights.IMAGENET1K_V2: 80.9% top-1)",
        "note": "base_lr 0.5 is for a global batch of 1024 (8 GPUs x 128): scale it with your batch. "
        "Published: 600 epochs, train crop 176; the reference's repeated-augmentation sampler is not used.",
        "config": {
            "epochs": 600,
            "solver": {
                "optimizer": "sgd",
                "base_lr": 0.5,
                "momentum": 0.9,
                "weight_decay": 0.00002,
                "lr_policy": "cosine",
                "warmup_percent": 0.8333,  # 5 of 600 epochs, linear
                "label_smoothing": 0.1,
                "ema_decay": 0.9999,
            },
            "data": {
                "random_resized_crop": True,
                "random_flip": True,
                "auto_augment": "trivialaugment",
                "random_erasing": 0.1,
                "mixup_alpha": 0.2,
                "cutmix_alpha": 1.0,
            },
        },
    },
    "deit": {
        "label": "DeiT (data-efficient image transformers)",
        "source": "https://github.com/facebookresearch/deit (main.py defaults; Touvron et al. 2021, arXiv:2012.12877)",
        "note": "base_lr 0.001 is 5e-4 x 1024/512 for a global batch of 1024: scale it with your batch. "
        "Published: 300 epochs; RandAugment m9, repeated augmentation and stochastic depth are the "
        "reference's, torchvision's RandAugment here.",
        "config": {
            "epochs": 300,
            "solver": {
                "optimizer": "adamw",
                "base_lr": 0.001,
                "weight_decay": 0.05,
                "lr_policy": "cosine",
                "min_lr": 0.00001,
                "warmup_percent": 1.6667,  # 5 of 300 epochs
                "label_smoothing": 0.1,
                "ema_decay": 0.99996,
            },
            "data": {
                "random_resized_crop": True,
                "random_flip": True,
                "auto_augment": "randaugment",
                "random_erasing": 0.25,
                "mixup_alpha": 0.8,
                "cutmix_alpha": 1.0,
            },
        },
    },
    "finetune_small": {
        "label": "fine-tune a small dataset",
        "source": "https://pytorch.org/tutorials/beginner/transfer_learning_tutorial.html "
        "(torchvision's transfer-learning tutorial: ImageNet weights, a few hundred images)",
        "note": "Start from pretrained weights trained on data like yours (weights whose features do not fit "
        "the target start worse than random ones). SGD 0.01 with momentum, cosine to zero over 25 epochs.",
        "config": {
            "epochs": 25,
            # The tutorial's 0.001, divided by 10 every 7 epochs, ended 8 points below training from
            # scratch on bench/bench_finetune.py's small dataset from weights whose features help
            # (a plain PyTorch loop did too); ten times the rate with a cosine decay ends 0.2 points
            # above it on the mean of six seeds (docs/benchmarks.md, "Six seeds of the new preset").
            # A 10 % warm-up was tried: it changed the fine-tuned runs by 0.2 points.
            "solver": {
                "optimizer": "sgd",
                "base_lr": 0.01,
                "momentum": 0.9,
                "weight_decay": 0.0,
                "lr_policy": "cosine",
            },
            "data": {"random_resized_crop": True, "random_flip": True},
        },
    },
}


# Each recipe augmentation's "off" value: any other value turns it on.
RECIPE_OFF: dict[str, Any] = {
    "data.random_resized_crop": False,
    "data.auto_augment": "none",
    "data.color_jitter": 0,
    "data.random_erasing": 0,
    "data.mixup_alpha": 0,
    "data.cutmix_alpha": 0,
    "solver.label_smoothing": 0,
}


def recipe_augments(setting: Callable[[str], Any]) -> list[str]:
    """The recipe augmentations turned on, by field path; `setting(path)` reads a config's value
    (a TrainConfig's, or a request's with its defaults)."""
    return [path for path, off in RECIPE_OFF.items() if setting(path) not in (off, None)]


def recipe_refusal(setting: Callable[[str], Any], *, channels: int, task: str) -> tuple[str, str] | None:
    """Why the recipe cannot apply to a dataset's images, as (field, message), or None: the one
    rule for the trainer's pre-flight and the workbench's validators (before anything is queued)."""
    on = recipe_augments(setting)
    if on and not TASK_TRAITS[task].augments:
        return on[0], f"applies to classification datasets only; this dataset is for {task}: leave it off"
    if channels == 1 and setting("data.color_jitter") not in (0, None):
        return (
            "data.color_jitter",
            "needs colour images (it changes saturation); this dataset's images are grey (1 channel): set it to 0",
        )
    return None


def preset_values(name: str) -> dict[str, Any]:
    """The config fields preset `name` sets, nested; KeyError for an unknown name."""
    return PRESETS[name]["config"]


def under_preset(raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` (a config as sent) with its preset's fields filled in where `raw` leaves them out;
    `raw` as it is without a preset. An unknown preset is left for validation to name."""
    name = raw.get("preset")
    if not isinstance(name, str) or name not in PRESETS:
        return raw
    merged: dict[str, Any] = {**raw}
    for key, value in preset_values(name).items():
        if isinstance(value, dict):
            sent = raw.get(key)
            merged[key] = {**value, **sent} if isinstance(sent, dict) else (sent if key in raw else {**value})
        elif key not in raw:
            merged[key] = value
    return merged


def averages_weights(raw: dict[str, Any]) -> bool:
    """Whether a config as sent (its preset filled in) keeps a weights' average (EMA): then the
    checkpoints hold the average, and best.pt is chosen on its metrics (trainer.protocol.
    checkpoint_series). A run's stored config leaves out the fields its preset gives."""
    solver = under_preset(raw).get("solver")
    decay = solver.get("ema_decay") if isinstance(solver, dict) else None
    return isinstance(decay, int | float) and not isinstance(decay, bool) and decay > 0
