"""Classification: one label per image, cross-entropy, top-1/top-5 (the workbench's first task)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from PIL import Image
from torch import nn

from trainer.config import NETWORKS, TrainConfig
from trainer.data import LMDBImageDataset, Normalize, mean_tensor, weights_normalize
from trainer.dataset_folder import DatasetInfo
from trainer.networks import InputSpec, build_model
from trainer.preprocess import uint8_batch
from trainer.protocol import CLASSIFICATION, TASK_METRICS, TASK_TRAITS
from trainer.tasks.base import model_from_state
from trainer.versions import open_images


class TopK:
    """Validation loss, top-1 and top-5 summed over the split's shards."""

    def __init__(self, num_classes: int, device: torch.device) -> None:
        self.k = min(5, num_classes)
        self.num_classes = num_classes
        self.totals = torch.zeros(4, device=device, dtype=torch.float64)  # loss, top1, top5, count
        self.notes: list[str] = []

    def update(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.float(), y, reduction="sum")
        hits = logits.topk(self.k, dim=1).indices.eq(y[:, None])
        count = torch.tensor(float(len(y)), device=self.totals.device, dtype=torch.float64)
        self.totals += torch.stack([loss.double(), hits[:, 0].sum().double(), hits.any(dim=1).sum().double(), count])

    def compute(self, *, world: int) -> dict[str, float]:
        if world > 1:
            dist.all_reduce(self.totals)
        loss_sum, top1, top5, count = self.totals.tolist()
        result = {"val_loss": loss_sum / max(1, count), "top1": top1 / max(1, count)}
        if self.num_classes > 5:
            result["top5"] = top5 / max(1, count)
        return result


class ClassificationTask:
    name = CLASSIFICATION
    networks = NETWORKS
    metrics = TASK_METRICS[CLASSIFICATION]
    traits = TASK_TRAITS[CLASSIFICATION]
    collate = None

    def build_model(self, name: str, spec: InputSpec) -> nn.Module:
        return build_model(name, spec)

    def dataset(self, info: DatasetInfo, split: str, *, cfg: TrainConfig, train: bool) -> LMDBImageDataset:
        db = open_images(info.splits[split])
        if not train:
            return LMDBImageDataset(db, crop_size=cfg.data.crop_size)
        flips = {"hflip": cfg.data.random_flip, "vflip": cfg.data.vertical_flip}
        # A random resized crop (on the device, trainer/augment.py) takes the whole image.
        crop = None if cfg.data.random_resized_crop else cfg.data.crop_size
        return LMDBImageDataset(db, crop_size=crop, train=True, **flips)

    def normalize(self, info: DatasetInfo, cfg: TrainConfig) -> Normalize:
        if cfg.data.norm_mean is not None and cfg.data.norm_std is not None:
            # Pretrained weights learnt on inputs normalised their way: fine-tuning keeps it.
            mean = weights_normalize(cfg.data.norm_mean, info.channels) * 255
            std = weights_normalize(cfg.data.norm_std, info.channels)
            return Normalize(mean, std=std, channels_last=cfg.channels_last)
        mean = mean_tensor(info, cfg.data.mean_subtraction, cfg.data.crop_size)
        return Normalize(mean, channels_last=cfg.channels_last)

    def to_device(self, targets: torch.Tensor, device: torch.device) -> torch.Tensor:
        return targets.to(device, non_blocking=True)

    def loss(self, model: nn.Module, x: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
        return nn.functional.cross_entropy(model(x), targets), {}

    def evaluator(self, info: DatasetInfo, device: torch.device) -> TopK:
        return TopK(info.num_classes, device)

    def forward(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return model(x)

    def synthetic_targets(self, spec: InputSpec, batch: int, generator: torch.Generator) -> torch.Tensor:
        return torch.randint(0, spec.num_classes, (batch,), generator=generator)

    def predictor(self, state: dict[str, Any], device: str | torch.device = "cpu") -> Classifier:
        """What inference runs for a checkpoint's state: a Classifier (top-k with probabilities)."""
        model = model_from_state(self, state)
        return Classifier(model, state["labels"], state["preprocessing"], state["mean"], device)


class Classifier:
    """Top-k classes with probabilities for images of any size, preprocessed as in training."""

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
        return self.normalize(torch.from_numpy(uint8_batch(images, self.preprocessing)).to(self.device))

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
