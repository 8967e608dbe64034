"""Shared fixtures: small dataset folders (session-scoped: built once) and config helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.trainer_data import make_dataset_folder, make_digits_folder
from trainer.config import TrainConfig, config_from_dict


@pytest.fixture(scope="session")
def gray8(tmp_path_factory) -> Path:
    """3 classes, 8x8 gray, 48 train / 12 val, raw datums."""
    return make_dataset_folder(
        tmp_path_factory.mktemp("gray8") / "ds", num_classes=3, size=8, channels=1, train=48, val=12
    )


@pytest.fixture(scope="session")
def rgb16(tmp_path_factory) -> Path:
    """3 classes, 16x16 RGB, PNG-encoded datums."""
    return make_dataset_folder(
        tmp_path_factory.mktemp("rgb16") / "ds", num_classes=3, size=16, channels=3, train=24, val=6, encoding="png"
    )


@pytest.fixture(scope="session")
def digits(tmp_path_factory) -> Path:
    return make_digits_folder(tmp_path_factory.mktemp("digits") / "ds")


def make_config(run_dir: Path, dataset: Path, **overrides: Any) -> TrainConfig:
    raw: dict[str, Any] = {
        "run_dir": str(run_dir),
        "network": "lenet",
        "epochs": 2,
        "batch_size": 8,
        "metrics_interval": 1,
        "data": {"dataset": str(dataset), "num_workers": 0},
        "solver": {"optimizer": "sgd", "base_lr": 0.05},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(raw.get(key), dict):
            raw[key] = {**raw[key], **value}
        else:
            raw[key] = value
    return config_from_dict(raw)
