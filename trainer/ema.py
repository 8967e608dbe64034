"""An exponential moving average of the weights (timm's ModelEmaV3), for recipes that validate and
export the average rather than the last step's weights (torchvision's ResNet v2, DeiT)."""

from __future__ import annotations

from typing import Any

from torch import nn

from trainer.config import TrainConfig


def weights_average(cfg: TrainConfig, model: nn.Module) -> Any:
    """The average of `model`'s weights to update after every optimizer step, or None when off.

    Warm-up on: the decay grows with the step (1 - (1 + step)^-3/4, at most solver.ema_decay), so
    a run of a few hundred steps gets an average of its trained weights, not of its random ones.
    """
    if not cfg.solver.ema_decay:
        return None
    from timm.utils import ModelEmaV3  # timm: loaded only where this runs

    return ModelEmaV3(model, decay=cfg.solver.ema_decay, use_warmup=True, warmup_power=0.75)
