"""The rules of the fine-tuning settings (trainer.config.validate calls them; trainer/finetune/recipe.py
applies them)."""

from __future__ import annotations

from typing import Any

from trainer.messages import ConfigError, shown


def check_finetune(cfg: Any) -> None:
    """`cfg` is a trainer.config.TrainConfig (not imported: config.py imports this module, and
    the import would run back up). The weights' normalisation, if given, is a mean and a std of 1 or 3 channels; the
    fine-tuning settings need weights to fine-tune."""
    for name in ("norm_mean", "norm_std"):
        value = getattr(cfg.data, name)
        if value is not None and (
            not isinstance(value, list)
            or len(value) not in (1, 3)
            or not all(not isinstance(v, bool) and isinstance(v, int | float) and 0 < v < 1 for v in value)
        ):
            raise ConfigError(f"{shown(value)} must be 1 or 3 numbers between 0 and 1, or null", field=f"data.{name}")
    if (cfg.data.norm_mean is None) != (cfg.data.norm_std is None):
        raise ConfigError("needs data.norm_mean and data.norm_std together", field="data.norm_std")
    if not isinstance(cfg.freeze_bn, bool):
        raise ConfigError("must be true or false", field="freeze_bn")
    asked = {"freeze_backbone_epochs": cfg.freeze_backbone_epochs > 0, "backbone_lr_mult": cfg.backbone_lr_mult != 1}
    for name, on in {**asked, "freeze_bn": cfg.freeze_bn}.items():
        if on and not cfg.pretrained:
            raise ConfigError("fine-tunes pretrained weights: choose weights to start from", field=name)
