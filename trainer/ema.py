"""An exponential moving average of the weights (timm's ModelEmaV3), for recipes that validate and
export the average rather than the last step's weights (torchvision's ResNet v2, DeiT)."""

from __future__ import annotations

from typing import Any

from torch import nn

from trainer.config import TrainConfig
from trainer.protocol import AVERAGE, RAW


def weights_average(cfg: TrainConfig, model: nn.Module) -> Any:
    """The average of `model`'s weights to update after every optimizer step, or None when off.

    Warm-up on: the decay grows with the step (1 - (1 + step)^-3/4, at most solver.ema_decay), so
    a run of a few hundred steps gets an average of its trained weights, not of its random ones.
    """
    if not cfg.solver.ema_decay:
        return None
    from timm.utils import ModelEmaV3  # timm: loaded only where this runs

    return ModelEmaV3(model, decay=cfg.solver.ema_decay, use_warmup=True, warmup_power=0.75)


def checkpoint_models(model: nn.Module, average: Any, weights: str) -> dict[str, Any]:
    """A checkpoint's weights: `model` is the ones it delivers (inference, exports and fine-tuning
    load it), `weights` says whose (protocol.checkpoint_weights), and the other set is kept under
    its own name so a resume continues both the training and the average."""
    if average is None:
        return {"model": model.state_dict(), "model_raw": None, "model_ema": None, "weights": RAW}
    raw, averaged = model.state_dict(), average.module.state_dict()
    if weights == RAW:
        return {"model": raw, "model_raw": None, "model_ema": averaged, "weights": RAW}
    return {"model": averaged, "model_raw": raw, "model_ema": None, "weights": AVERAGE}


def resumed_models(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The raw weights and the average a checkpoint resumes (one of them is its `model`);
    checkpoints written before issue 33 held the average as `model`, the raw as `model_raw`."""
    return state.get("model_raw") or state["model"], state.get("model_ema") or state["model"]


def first_weights(cfg: TrainConfig) -> str:
    """The weights checkpoints hold before the first validation picks: the forced ones, else the
    average when there is one (what the recipe asked for)."""
    if not cfg.solver.ema_decay:
        return RAW
    return cfg.best_weights or AVERAGE
