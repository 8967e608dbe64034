"""Fine-tuning from pretrained weights as practitioners do it (torchvision's references, timm):
the head replaced for the dataset's classes, the backbone frozen for the first epochs or trained
at a lower rate (a learning-rate multiplier on its parameter group), BatchNorm kept in eval mode.

The backbone is what the weights gave: every parameter loaded from the file. What was not loaded
(the classifier sized for the dataset's classes) is the head, which starts from its fresh
initialisation and so needs the full rate.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from torch import nn

from trainer.config import TrainConfig

log = logging.getLogger("trainer")


def describe_load(loaded: list[str], replaced: list[str], num_classes: int) -> None:
    """The run log's words for what the weights gave (names only: no file, no folder)."""
    # BatchNorm's step counters are absent from older published files: not a replaced layer.
    replaced = [name for name in replaced if not name.endswith("num_batches_tracked")]
    shown = ", ".join(replaced[:6]) + (", ..." if len(replaced) > 6 else "")
    log.info(
        "fine-tuning: loaded %d tensors from the pretrained weights; replaced %d for the dataset's %d classes: %s",
        len(loaded),
        len(replaced),
        num_classes,
        shown or "none",
    )


def parameter_groups(model: nn.Module, loaded: Iterable[str], cfg: TrainConfig) -> list[dict]:
    """The optimizer's groups: the head at base_lr first (the rate the metrics report), then the
    backbone at base_lr x backbone_lr_mult. One group when there are no pretrained weights."""
    if not cfg.pretrained:
        return [{"params": list(model.parameters())}]
    loaded = set(loaded)
    head, backbone = [], []
    for name, parameter in model.named_parameters():
        (backbone if name in loaded else head).append(parameter)
    groups = [{"params": head, "part": "head"}] if head else []
    if backbone:
        groups.append({"params": backbone, "part": "backbone", "lr": cfg.solver.base_lr * cfg.backbone_lr_mult})
    return groups


def frozen_steps(groups: list[dict], cfg: TrainConfig, steps_per_epoch: int) -> list[int]:
    """Steps each group's rate stays at 0: the backbone's for freeze_backbone_epochs. A zero rate
    freezes its weights exactly for every optimizer (weight decay and momentum are scaled by it)
    and, unlike requires_grad, changes nothing DDP or torch.compile were built around."""
    until = round(cfg.freeze_backbone_epochs * steps_per_epoch)
    return [until if group.get("part") == "backbone" else 0 for group in groups]


def _eval_mode(module: nn.Module, _inputs) -> None:
    module.training = False


def keep_batchnorm_eval(model: nn.Module) -> int:
    """BatchNorm layers stay in eval mode (their running statistics as pretrained, their affine
    weights still trained): a small dataset's batches would drag ImageNet's statistics around.
    A forward pre-hook, so every model.train() of the loop is overridden and a copy keeps it."""
    layers = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for layer in layers:
        layer.register_forward_pre_hook(_eval_mode)
    return len(layers)


def report_plan(groups: list[dict], cfg: TrainConfig, batchnorm_layers: int) -> None:
    if not cfg.pretrained:
        return
    backbone = sum(p.numel() for g in groups if g.get("part") == "backbone" for p in g["params"])
    head = sum(p.numel() for g in groups if g.get("part") == "head" for p in g["params"])
    plan = [f"backbone {backbone} parameters at base_lr x {cfg.backbone_lr_mult:g}", f"head {head} at base_lr"]
    if cfg.freeze_backbone_epochs:
        plan.append(f"backbone frozen for the first {cfg.freeze_backbone_epochs:g} epoch(s)")
    if cfg.freeze_bn:
        plan.append(f"{batchnorm_layers} BatchNorm layers kept in eval mode")
    log.info("fine-tuning: %s", "; ".join(plan))
