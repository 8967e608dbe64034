"""Classify, detect or segment images with a trained model, with exactly the training
preprocessing: resize to the dataset size by its resize mode -> centre crop (if trained with
crops) -> uint8 C x H x W -> the task's normalisation -> model -> top-k, boxes or a mask.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from PIL import Image
from safetensors.torch import load_file
from torch import nn

from trainer.checkpoint import CheckpointStore
from trainer.data import Normalize
from trainer.networks import InputSpec, build_model
from trainer.protocol import CLASSIFICATION, DETECTION, SEGMENTATION
from trainer.tasks import task_for
from trainer.tasks.base import as_rgb
from trainer.tasks.segmentation import Standardize


def resize_image(image: Image.Image, width: int, height: int, mode: str) -> Image.Image:
    """DIGITS' resize modes. `fill` and `half_crop` pad with noise, as DIGITS does (a seeded
    noise, so the same image always gives the same result)."""
    iw, ih = image.size
    if mode == "squash" or (iw, ih) == (width, height):
        return image.resize((width, height), Image.BILINEAR)
    cover, fit = max(width / iw, height / ih), min(width / iw, height / ih)
    scale = {"crop": cover, "fill": fit, "half_crop": (cover + fit) / 2}.get(mode)
    if scale is None:
        raise ValueError(f"resize_mode: {mode!r} is not one of squash, crop, fill, half_crop")
    rw, rh = max(1, round(iw * scale)), max(1, round(ih * scale))
    resized = image.resize((rw, rh), Image.BILINEAR)
    left, top = max(0, (rw - width) // 2), max(0, (rh - height) // 2)
    resized = resized.crop((left, top, left + min(rw, width), top + min(rh, height)))
    if resized.size == (width, height):
        return resized
    bands = len(resized.getbands())
    noise = np.random.default_rng(0).integers(0, 256, size=(height, width, bands), dtype=np.uint8)
    canvas = Image.fromarray(noise[:, :, 0] if bands == 1 else noise, mode=resized.mode)
    canvas.paste(resized, ((width - resized.size[0]) // 2, (height - resized.size[1]) // 2))
    return canvas


def image_to_uint8(image: Image.Image, pre: dict[str, Any]) -> np.ndarray:
    """PIL image -> uint8 C x H x W as the model saw it in training (before normalisation)."""
    image = image.convert("L" if pre["channels"] == 1 else "RGB")
    image = resize_image(image, pre["width"], pre["height"], pre["resize_mode"])
    arr = np.asarray(image, dtype=np.uint8)
    chw = arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1)
    crop = pre.get("crop")
    if crop:
        top, left = (chw.shape[1] - crop) // 2, (chw.shape[2] - crop) // 2
        chw = chw[:, top : top + crop, left : left + crop]
    return np.ascontiguousarray(chw)


class Predictor(Protocol):
    """What inference and the exports hold of a trained model, whatever its task; each task gives
    its own (`trainer.tasks.task_for(name).predictor(state)`)."""

    task: str  # the name of the task that gives it: trainer.tasks.task_for(task)
    model: nn.Module
    labels: list[str]
    preprocessing: dict[str, Any]
    device: torch.device


class Classifier:
    task = CLASSIFICATION

    def __init__(
        self,
        model: nn.Module,
        labels: list[str],
        preprocessing: dict[str, Any],
        mean: torch.Tensor | None,
        device: str | torch.device = "cpu",
    ) -> None:
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.labels = labels
        self.preprocessing = preprocessing
        std = preprocessing.get("std")  # pretrained weights' own normalisation, when trained with it
        self.normalize = Normalize(mean, std=None if std is None else torch.tensor(std).view(-1, 1, 1))
        self.normalize = self.normalize.to(self.device)

    def preprocess(self, images: list[Image.Image]) -> torch.Tensor:
        batch = np.stack([image_to_uint8(im, self.preprocessing) for im in images])
        return self.normalize(torch.from_numpy(batch).to(self.device))

    @torch.no_grad()
    def probabilities(self, images: list[Image.Image]) -> torch.Tensor:
        return torch.softmax(self.model(self.preprocess(images)).float(), dim=1).cpu()

    def classify(self, images: list[Image.Image], top_k: int = 5) -> list[list[tuple[str, float]]]:
        probs = self.probabilities(images)
        values, indices = probs.topk(min(top_k, len(self.labels)), dim=1)
        return [
            [(self.labels[i], float(p)) for p, i in zip(vs.tolist(), ix.tolist(), strict=True)]
            for vs, ix in zip(values, indices, strict=True)
        ]


def model_from_parts(config: dict[str, Any], preprocessing: dict[str, Any], num_classes: int) -> nn.Module:
    c, h, w = preprocessing["input_shape"]
    return build_model(config["network"], InputSpec(c, h, w, num_classes, config.get("custom_layers") or []))


def load_bundle(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> Classifier:
    """Load a bundle written by `trainer.export.export_bundle`."""
    root = Path(path)
    config = json.loads((root / "config.json").read_text(encoding="utf-8"))
    pre = json.loads((root / "preprocessing.json").read_text(encoding="utf-8"))
    labels = (root / "labels.txt").read_text(encoding="utf-8").splitlines()
    model = model_from_parts(config, pre, len(labels))
    model.load_state_dict(load_file(root / "model.safetensors"))
    mean = torch.from_numpy(np.load(root / "mean.npy")) if (root / "mean.npy").exists() else None
    return Classifier(model, labels, pre, mean, device)


def load_checkpoint_classifier(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> Classifier:
    predictor = load_checkpoint_predictor(path, device)
    if not isinstance(predictor, Classifier):
        raise ValueError(f"checkpoint {Path(path).name} is a {type(predictor).__name__.lower()}'s, not a classifier's")
    return predictor


# ------------------------------------------------------------------------------- detection, segmentation


class Detector:
    """Boxes with class and score for images of any size: resized as in training, detected,
    and the boxes scaled back to each image's own pixels (squash, the tasks' stored resize)."""

    task = DETECTION

    def __init__(self, model: nn.Module, labels: list[str], preprocessing: dict[str, Any], device="cpu") -> None:
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.labels, self.preprocessing = labels, preprocessing
        self.normalize = Normalize(None).to(self.device)

    @torch.no_grad()
    def detect(self, images: list[Image.Image], *, min_score: float = 0.05) -> list[list[dict[str, Any]]]:
        batch = np.stack([image_to_uint8(im, self.preprocessing) for im in images])
        x = self.normalize(torch.from_numpy(batch).to(self.device))
        found = []
        for image, out in zip(images, self.model(list(as_rgb(x))), strict=True):
            sx, sy = image.size[0] / self.preprocessing["width"], image.size[1] / self.preprocessing["height"]
            keep = out["scores"] >= min_score
            found.append(
                [
                    {"label": self.labels[int(k) - 1], "score": float(s), "box": [x1 * sx, y1 * sy, x2 * sx, y2 * sy]}
                    for (x1, y1, x2, y2), s, k in zip(
                        out["boxes"][keep].tolist(),
                        out["scores"][keep].tolist(),
                        out["labels"][keep].tolist(),
                        strict=True,
                    )
                ]
            )
        return found


class Segmenter:
    """A class per pixel for images of any size, at each image's own size (nearest)."""

    task = SEGMENTATION

    def __init__(self, model: nn.Module, labels: list[str], preprocessing: dict[str, Any], device="cpu") -> None:
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.labels, self.preprocessing = labels, preprocessing
        self.normalize = Standardize().to(self.device)

    @torch.no_grad()
    def segment(self, images: list[Image.Image]) -> list[np.ndarray]:
        batch = np.stack([image_to_uint8(im, self.preprocessing) for im in images])
        classes = self.model(self.normalize(torch.from_numpy(batch).to(self.device)))["out"].argmax(1)
        return [
            np.asarray(Image.fromarray(mask.to(torch.uint8).cpu().numpy(), mode="L").resize(image.size, Image.NEAREST))
            for image, mask in zip(images, classes, strict=True)
        ]


def load_checkpoint_predictor(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> Predictor:
    """The predictor its task gives for a checkpoint (a Classifier, a Detector or a Segmenter); a
    checkpoint written before tasks were recorded is a classifier's."""
    state = CheckpointStore.load(path)
    return task_for(state.get("task", CLASSIFICATION)).predictor(state, device)


def task_model(state: dict[str, Any]) -> nn.Module:
    """A detector's or segmentation network's model, its weights loaded from a checkpoint's state."""
    c, h, w = state["preprocessing"]["input_shape"]
    model = task_for(state["task"]).build_model(state["config"]["network"], InputSpec(c, h, w, len(state["labels"])))
    model.load_state_dict(state["model"])
    return model
