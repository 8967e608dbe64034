"""Load a trained model for inference: from a checkpoint (whatever its task) or from an exported
bundle (a classifier's). What runs an image is the task's predictor, beside its task
(trainer/tasks/<task>.py: Classifier, Detector, Segmenter), with exactly the training
preprocessing (trainer/preprocess.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from trainer.checkpoint import CheckpointStore
from trainer.protocol import CLASSIFICATION
from trainer.tasks import task_for
from trainer.tasks.base import Predictor, model_from_state
from trainer.tasks.classification import ClassificationTask, Classifier


def load_bundle(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> Classifier:
    """Load a bundle written by `trainer.export.export_bundle`."""
    root = Path(path)
    config = json.loads((root / "config.json").read_text(encoding="utf-8"))
    pre = json.loads((root / "preprocessing.json").read_text(encoding="utf-8"))
    labels = (root / "labels.txt").read_text(encoding="utf-8").splitlines()
    state = {"config": config, "preprocessing": pre, "labels": labels, "model": load_file(root / "model.safetensors")}
    model = model_from_state(ClassificationTask(), state)
    mean = torch.from_numpy(np.load(root / "mean.npy")) if (root / "mean.npy").exists() else None
    return Classifier(model, labels, pre, mean, device)


def load_checkpoint_predictor(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> Predictor:
    """The predictor its task gives for a checkpoint (a Classifier, a Detector or a Segmenter); a
    checkpoint written before tasks were recorded is a classifier's."""
    state = CheckpointStore.load(path)
    return task_for(state.get("task", CLASSIFICATION)).predictor(state, device)


def load_checkpoint_classifier(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> Classifier:
    predictor = load_checkpoint_predictor(path, device)
    if not isinstance(predictor, Classifier):
        raise ValueError(f"checkpoint {Path(path).name} is a {type(predictor).__name__.lower()}'s, not a classifier's")
    return predictor
