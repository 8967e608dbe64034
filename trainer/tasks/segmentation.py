"""Semantic segmentation: a class per pixel (IGNORE_INDEX = no class); torchvision's FCN,
DeepLabV3 and LR-ASPP (never downloaded weights), joint augmentation of image and mask with
transforms.v2, and mIoU, per-class IoU, pixel accuracy and Dice from one confusion matrix, as
torchvision's references/segmentation computes them. Pixel accuracy alone hid that nothing was
found (98 % on a background-heavy set): mIoU is the default best metric.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from PIL import Image
from torch import nn
from torch.utils.data import Dataset
from torchvision import tv_tensors
from torchvision.models import segmentation
from torchvision.transforms import v2

from trainer.config import TrainConfig
from trainer.data import Normalize
from trainer.dataset_folder import DatasetInfo
from trainer.datum import DatumLMDB
from trainer.networks import InputSpec
from trainer.preprocess import uint8_batch
from trainer.protocol import IGNORE_INDEX, SEGMENTATION, TASK_METRICS, TASK_NETWORKS, TASK_TRAITS
from trainer.targets import decode_mask
from trainer.tasks.base import as_rgb, image_tensor, model_from_state, seeded, with_seed
from trainer.versions import OverlaidLMDB, open_images, open_targets

# ImageNet statistics: torchvision's segmentation networks do not normalise inside (the
# detectors do), and these are the statistics their published recipes train with.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class Standardize(Normalize):
    """0..1 pixels, then (x - mean) / std per channel, on the device."""

    def __init__(self, *, channels_last: bool = False) -> None:
        super().__init__(None, channels_last=channels_last)
        self.scale = (torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1))

    def to(self, device: torch.device) -> Standardize:
        out = Standardize()
        out.memory_format = self.memory_format
        out.scale = tuple(t.to(device) for t in self.scale)
        return out

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        mean, std = self.scale
        x = as_rgb(batch.float().mul_(1.0 / 255))
        return ((x - mean) / std).contiguous(memory_format=self.memory_format)


class SegmentationDataset(Dataset):
    """Items: (uint8 C x H x W image, uint8 H x W mask of class indexes)."""

    def __init__(
        self, images: DatumLMDB | OverlaidLMDB, masks: DatumLMDB | OverlaidLMDB, *, transform: v2.Transform | None
    ) -> None:
        self.images, self.masks, self.transform = images, masks, transform

    def __len__(self) -> int:
        return len(self.images)

    def close(self) -> None:
        self.images.close()
        self.masks.close()

    def __getitem__(self, item: int | tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
        index, seed = seeded(item)
        chw, _ = self.images[index]
        mask = decode_mask(self.masks.raw(index), where=f"{self.masks.path} record {index}")
        image, target = tv_tensors.Image(image_tensor(chw)), tv_tensors.Mask(torch.from_numpy(mask))
        if self.transform is not None:
            image, target = with_seed(seed, lambda: self.transform(image, target))
        return image.as_subclass(torch.Tensor), target.as_subclass(torch.Tensor)


def train_transform(cfg: TrainConfig, height: int, width: int) -> v2.Transform:
    """Flip, scale jitter, and a crop back to the stored size; what the crop pads is ignored."""
    steps: list[v2.Transform] = []
    if cfg.data.random_flip:
        steps.append(v2.RandomHorizontalFlip())
    steps += [
        v2.ScaleJitter(target_size=(height, width), scale_range=(0.75, 1.25), antialias=True),
        v2.RandomCrop((height, width), pad_if_needed=True, fill={tv_tensors.Mask: IGNORE_INDEX, "others": 0}),
    ]
    return v2.Compose(steps)


def pixel_pairs(predicted: torch.Tensor, target: torch.Tensor, num_classes: int) -> torch.Tensor:
    """The (true, predicted) confusion counts of these pixels, the ignore index left out."""
    valid = target != IGNORE_INDEX
    pairs = target[valid].long() * num_classes + predicted[valid].long()
    return torch.bincount(pairs, minlength=num_classes**2).reshape(num_classes, -1).double()


class ConfusionMatrix:
    """Pixels counted per (true, predicted) class over the split, ignore index left out."""

    def __init__(self, num_classes: int, device: torch.device) -> None:
        self.num_classes = num_classes
        self.matrix = torch.zeros(num_classes, num_classes, device=device, dtype=torch.float64)
        self.loss = torch.zeros(2, device=device, dtype=torch.float64)  # summed loss, pixels
        self.notes: list[str] = []

    def update(self, model: nn.Module, x: torch.Tensor, masks: torch.Tensor) -> None:
        logits = model(x)["out"].float()
        target = masks.long()
        loss = nn.functional.cross_entropy(logits, target, ignore_index=IGNORE_INDEX, reduction="sum")
        self.loss += torch.stack([loss.double(), (target != IGNORE_INDEX).sum().double()])
        self.matrix += pixel_pairs(logits.argmax(1), target, self.num_classes)

    def per_class(self) -> dict[str, list[float | None]]:
        """IoU and Dice of each class (None: neither in the split nor predicted)."""
        hits = self.matrix.diag()
        truth, predicted = self.matrix.sum(1), self.matrix.sum(0)
        union = truth + predicted - hits
        return {
            "iou": [float(h / u) if u else None for h, u in zip(hits, union, strict=True)],
            "dice": [
                float(2 * h / (t + p)) if u else None for h, t, p, u in zip(hits, truth, predicted, union, strict=True)
            ],
        }

    def compute(self, *, world: int) -> dict[str, float]:
        if world > 1:
            dist.all_reduce(self.matrix)
            dist.all_reduce(self.loss)
        # A class neither in the split nor predicted says nothing either way: it is left out.
        classes = self.per_class()
        iou = [value for value in classes["iou"] if value is not None]
        dice = [value for value in classes["dice"] if value is not None]
        pixels, predicted = self.matrix.sum(), self.matrix.sum(0)
        result = {
            "miou": sum(iou) / len(iou) if iou else 0.0,
            "pixel_accuracy": float(self.matrix.diag().sum() / pixels) if pixels else 0.0,
            "dice": sum(dice) / len(dice) if dice else 0.0,
            "val_loss": float(self.loss[0] / self.loss[1].clamp(min=1)),
        }
        if pixels and int((predicted > 0).sum()) == 1:
            only = int(predicted.argmax())
            self.notes.append(
                f"every validation pixel is predicted as class {only}: the network has not separated any class yet"
            )
        return result


class SegmentationTask:
    name = SEGMENTATION
    networks = TASK_NETWORKS[SEGMENTATION]
    metrics = TASK_METRICS[SEGMENTATION]
    traits = TASK_TRAITS[SEGMENTATION]
    collate = None  # images and masks of one size stack as they are

    def build_model(self, name: str, spec: InputSpec) -> nn.Module:
        builder = getattr(segmentation, name)
        return builder(weights=None, weights_backbone=None, num_classes=spec.num_classes)

    def dataset(self, info: DatasetInfo, split: str, *, cfg: TrainConfig, train: bool) -> SegmentationDataset:
        where = info.splits[split]
        transform = train_transform(cfg, info.image_height, info.image_width) if train else None
        return SegmentationDataset(open_images(where), open_targets(where), transform=transform)

    def normalize(self, info: DatasetInfo, cfg: TrainConfig) -> Standardize:
        return Standardize(channels_last=cfg.channels_last)

    def to_device(self, targets: torch.Tensor, device: torch.device) -> torch.Tensor:
        return targets.to(device, non_blocking=True)

    def loss(self, model: nn.Module, x: torch.Tensor, masks: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
        out = model(x)
        target = masks.long()
        loss = nn.functional.cross_entropy(out["out"], target, ignore_index=IGNORE_INDEX)
        if "aux" in out:  # the auxiliary head, weighted as torchvision's recipe does
            aux = nn.functional.cross_entropy(out["aux"], target, ignore_index=IGNORE_INDEX)
            return loss + 0.5 * aux, {"out": loss.detach(), "aux": aux.detach()}
        return loss, {}

    def evaluator(self, info: DatasetInfo, device: torch.device) -> ConfusionMatrix:
        return ConfusionMatrix(info.num_classes, device)

    def forward(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return model(x)["out"]

    def synthetic_targets(self, spec: InputSpec, batch: int, generator: torch.Generator) -> torch.Tensor:
        # Stored masks are uint8 class indices (255 = ignore), as the loader gives them; a benchmark's
        # thousand synthetic classes do not fit a byte and stay whole numbers.
        dtype = torch.uint8 if spec.num_classes <= IGNORE_INDEX else torch.long
        shape = (batch, spec.height, spec.width)
        return torch.randint(0, spec.num_classes, shape, generator=generator).to(dtype)

    def predictor(self, state: dict[str, Any], device: str | torch.device = "cpu") -> Segmenter:
        """What inference runs for a checkpoint's state: a Segmenter (a class per pixel)."""
        return Segmenter(model_from_state(self, state), state["labels"], state["preprocessing"], device)


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
        batch = torch.from_numpy(uint8_batch(images, self.preprocessing)).to(self.device)
        classes = self.model(self.normalize(batch))["out"].argmax(1)
        return [
            np.asarray(Image.fromarray(mask.to(torch.uint8).cpu().numpy(), mode="L").resize(image.size, Image.NEAREST))
            for image, mask in zip(images, classes, strict=True)
        ]
