"""Train-time recipe augmentations on the device, on the whole uint8 batch (torchvision.transforms.v2).

The loader's workers only decode, cut the plain random crop and flip (numpy views, no copies);
everything a modern recipe adds runs here, after the batch reached its device, so a GPU host
with few CPU cores is not bound by its loader (bench/bench_recipes.py measures the difference):

    uint8 batch -> random resized crop (every image its own box)
                -> TrivialAugment / RandAugment / AutoAugment, colour jitter (uint8)
                -> normalise -> random erasing -> mixup / cutmix, label smoothing (soft targets)

The policies and the jitter draw their operation and magnitude for every image, as the papers
and torchvision's references do: a v2 transform draws once per call, so each image is its own
call. Measured on a CPU at 224 (one thread), a colour operation costs about the same per image
alone as within a call of 8 (sharpness and equalize less alone), while a shear, translation or
rotation costs ~2.6x (a sampling grid per call instead of one per group); batching those with a
matrix per image gave no gain (a grid per image either way). docs/benchmarks.md ("Recipes") has
the whole pipeline against torchvision's reference, before and after. On a GPU, a call per image
is a few kernel launches per image: not measured here (no GPU).
Each step's draws come from a generator seeded by (seed, step, rank), so a resumed run sees the
augmentations of an uninterrupted one, and the global RNG (dropout) is left as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import torch
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from trainer.config import TrainConfig
from trainer.preflight import setting_of
from trainer.recipes import recipe_augments

# Bilinear, as torchvision's reference presets (presets.py, train.py's --interpolation) and timm
# build them; the policies' own default, nearest, turns a rotated or sheared small image blocky.
_POLICIES: dict[str, Callable[[], v2.Transform]] = {
    name: partial(policy, interpolation=v2.InterpolationMode.BILINEAR)
    for name, policy in (
        ("trivialaugment", v2.TrivialAugmentWide),
        ("randaugment", v2.RandAugment),
        ("autoaugment", v2.AutoAugment),
    )
}


class TrainAugment:
    """The train batch's way to the network: `(uint8 images, labels) -> (input, targets)`; with no
    recipe augmentation on, only the normalisation. Targets become class probabilities when
    mixup, cutmix or label smoothing is on (cross-entropy takes them as they are)."""

    def __init__(self, cfg: TrainConfig, *, num_classes: int, out_size: tuple[int, int], rank: int = 0) -> None:
        d = cfg.data
        self.seed, self.rank, self.num_classes = cfg.seed, rank, num_classes
        self.out_size = out_size
        self.crop = (
            v2.RandomResizedCrop(out_size, scale=tuple(d.rrc_scale), ratio=tuple(d.rrc_ratio))
            if d.random_resized_crop
            else None
        )
        self.device_flip = False  # the loader flips; bench_recipes flips here, on the batch
        policy = _POLICIES.get(d.auto_augment)
        steps = [policy()] if policy else []
        if d.color_jitter:
            steps.append(v2.ColorJitter(brightness=d.color_jitter, contrast=d.color_jitter, saturation=d.color_jitter))
        self.per_image = v2.Compose(steps) if steps else None
        self.erase_p = d.random_erasing
        self.erasing = v2.RandomErasing(p=1.0)
        mixes = [v2.MixUp(alpha=d.mixup_alpha, num_classes=num_classes)] if d.mixup_alpha else []
        mixes += [v2.CutMix(alpha=d.cutmix_alpha, num_classes=num_classes)] if d.cutmix_alpha else []
        self.mix = v2.RandomChoice(mixes) if mixes else None
        self.smoothing = cfg.solver.label_smoothing
        self.active = bool(recipe_augments(setting_of(cfg)))

    def __call__(
        self,
        images: torch.Tensor,
        targets: torch.Tensor,
        *,
        step: int,
        normalize: Callable[[torch.Tensor], torch.Tensor],
    ) -> tuple[torch.Tensor, Any]:
        if not self.active:
            return normalize(images), targets
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed((self.seed * 1_000_003 + step) * 1009 + self.rank)
            x = normalize(self.images(images))
            return self.labels(x, targets)

    def images(self, batch: torch.Tensor) -> torch.Tensor:
        """The uint8 stage: crops, flips, the policy and the jitter; N x C x h x w -> uint8."""
        if self.crop is not None:
            batch = self._resized_crops(batch)
        if self.device_flip:
            flip = torch.rand(batch.shape[0]) < 0.5
            batch = torch.where(flip.to(batch.device)[:, None, None, None], batch.flip(-1), batch)
        if self.per_image is not None:
            out = torch.empty_like(batch)
            for index in range(batch.shape[0]):  # one call, so one draw, per image
                out[index] = self.per_image(batch[index])
            batch = out
        return batch

    def _resized_crops(self, batch: torch.Tensor) -> torch.Tensor:
        # v2.RandomResizedCrop draws each image's box (its scale and ratio rules); v2's
        # resized_crop cuts and resizes it on the uint8 image (torch's antialiased uint8 bilinear
        # kernel: 3.6x the speed of one roi_align over the float batch on a CPU).
        out = torch.empty((batch.shape[0], batch.shape[1], *self.out_size), dtype=torch.uint8, device=batch.device)
        for index in range(batch.shape[0]):
            box = self.crop.make_params([batch[index]])
            out[index] = F.resized_crop(
                batch[index], box["top"], box["left"], box["height"], box["width"], list(self.out_size), antialias=True
            )
        return out

    def labels(self, x: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The float stage: random erasing per image, then mixup or cutmix and label smoothing."""
        if self.erase_p:
            chosen = (torch.rand(x.shape[0]) < self.erase_p).nonzero().flatten().tolist()
            for index in chosen:
                x[index] = self.erasing(x[index])
        if self.mix is None and not self.smoothing:
            return x, targets
        if self.mix is not None:
            x, targets = self.mix(x, targets)
        else:
            targets = torch.nn.functional.one_hot(targets, self.num_classes).to(x.dtype)
        if self.smoothing:
            targets = targets * (1 - self.smoothing) + self.smoothing / self.num_classes
        return x, targets


def preview(image: np.ndarray, cfg: TrainConfig, *, copies: int = 8) -> list[np.ndarray]:
    """`copies` augmented versions of one C x H x W uint8 image, as training makes them: the
    loader's crop and flips, then the device's stage and random erasing (erased to black), each
    as a different image of a batch would get it. H x W x C uint8 arrays, for the new-run form."""
    rng = np.random.default_rng(cfg.seed)
    crop = None if cfg.data.random_resized_crop else cfg.data.crop_size
    side = cfg.data.crop_size
    augment = TrainAugment(cfg, num_classes=2, out_size=(side or image.shape[1], side or image.shape[2]))
    shown = []
    for index in range(copies):
        x = image
        if crop:
            top, left = int(rng.integers(0, x.shape[1] - crop + 1)), int(rng.integers(0, x.shape[2] - crop + 1))
            x = x[:, top : top + crop, left : left + crop]
        if cfg.data.random_flip and rng.random() < 0.5:
            x = x[:, :, ::-1]
        if cfg.data.vertical_flip and rng.random() < 0.5:
            x = x[:, ::-1, :]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed * 1009 + index)
            out = augment.images(torch.from_numpy(np.ascontiguousarray(x))[None])[0]
            if augment.erase_p and torch.rand(()) < augment.erase_p:
                out = augment.erasing(out.float()).to(torch.uint8)
        array = out.numpy()
        shown.append(np.ascontiguousarray(array.transpose(1, 2, 0)))
    return shown
