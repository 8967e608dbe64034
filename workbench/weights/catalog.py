"""What the libraries publish for each network: torchvision's `Weights` enums (file name, url, the
hash prefix in that name, accuracy, preprocessing) and, when timm is installed, its
`pretrained_cfg`s. Read from the installed libraries, never from the network."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from trainer.zoo import TIMM_PREFIX

# torch.hub's rule: the file name's last "-<hex>." part is the start of the file's sha256.
_HASH_IN_NAME = re.compile(r"-([a-f0-9]{8,64})\.")
# torchvision publishes no licence for most weights: its code is BSD-3-Clause and the weights
# carry the terms of the data they were trained on (its README says so); we say that, no more.
TORCHVISION_LICENCE = "torchvision BSD-3-Clause; the training data's terms apply"
# Networks the store never holds published weights for: ours, and the user-defined one.
NOT_PUBLISHED = ("lenet", "custom")


@dataclass(frozen=True)
class Published:
    network: str
    source: str  # torchvision | timm
    tag: str  # IMAGENET1K_V1, or timm's "<arch>.<tag>"
    file_name: str  # what to drop into the cache folder when offline
    url: str
    hash_prefix: str  # "" when the library publishes none (timm)
    dataset: str
    licence: str
    accuracy: dict = field(default_factory=dict)
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    resize: int | None = None
    crop: int | None = None
    default: bool = False  # the library's DEFAULT (torchvision) or first tag (timm)

    @property
    def headline(self) -> str:
        return headline(self.accuracy, self.dataset)

    def matches(self, sha256: str) -> bool:
        return bool(self.hash_prefix) and sha256.startswith(self.hash_prefix)


# What a page says where a library publishes no number: timm's cfgs carry none, and torchvision's
# vgg16 IMAGENET1K_FEATURES (a backbone only) publishes NaN, once shown as "top-1 nan%".
NO_ACCURACY = "not published"


def finite_numbers(accuracy: dict) -> dict:
    """The published numbers that are numbers: NaN and infinities are no accuracy (nor JSON)."""
    return {k: v for k, v in accuracy.items() if isinstance(v, int | float) and math.isfinite(v)}


def headline(accuracy: dict, dataset: str) -> str:
    """The published number a page shows: "top-1 69.758% (ImageNet-1k)", "box mAP 22.8 (COCO)",
    or NO_ACCURACY in words."""
    numbers = finite_numbers(accuracy)
    for key, words in (("acc@1", "top-1 {}%"), ("box_map", "box mAP {}"), ("miou", "mIoU {}")):
        if key in numbers:
            return words.format(numbers[key]) + (f" ({dataset})" if dataset else "")
    return NO_ACCURACY


def _first(value) -> int | None:
    if isinstance(value, list | tuple):
        return int(value[0]) if value else None
    return int(value) if value else None


def torchvision_published(network: str) -> list[Published]:
    # torchvision only here: the pages that import this module list networks without it.
    from torchvision.models import get_model_weights  # torchvision: loaded only where this runs

    try:
        enum = get_model_weights(network)
    except (ValueError, KeyError):
        return []
    found = []
    for weights in enum:
        meta = weights.meta
        metrics = next(iter((meta.get("_metrics") or {}).items()), ("", {}))
        dataset = "COCO" if metrics[0].startswith("COCO") else metrics[0].replace("ImageNet-1K", "ImageNet-1k")
        transforms = weights.transforms()
        file_name = weights.url.rsplit("/", 1)[-1]
        match = _HASH_IN_NAME.search(file_name)
        found.append(
            Published(
                network=network,
                source="torchvision",
                tag=weights.name,
                file_name=file_name,
                url=weights.url,
                hash_prefix=match.group(1) if match else "",
                dataset=dataset,
                licence=meta.get("license") or TORCHVISION_LICENCE,
                accuracy=finite_numbers(metrics[1]),
                mean=tuple(getattr(transforms, "mean", ()) or ()) or None,
                std=tuple(getattr(transforms, "std", ()) or ()) or None,
                resize=_first(getattr(transforms, "resize_size", None)),
                crop=_first(getattr(transforms, "crop_size", None)),
                default=weights == enum.DEFAULT,
            )
        )
    return found


def _timm_dataset(name: str) -> str:
    """What a timm tag says it was trained on: "convnext_atto.d2_in1k" -> "ImageNet-1k"."""
    tag = name.partition(".")[2]
    for marker, words in (("in22k_ft_in1k", "ImageNet-22k → 1k"), ("in12k_ft_in1k", "ImageNet-12k → 1k"),
                          ("in22k", "ImageNet-22k"), ("in12k", "ImageNet-12k"), ("in1k", "ImageNet-1k")):  # fmt: skip
        if marker in tag:
            return words
    return "ImageNet"


def timm_published(network: str) -> list[Published]:
    """timm's pretrained tags of `network` (the zoo's `timm/<architecture>`), when timm is installed."""
    try:
        import timm  # optional: the store works with torchvision alone
    except ImportError:
        return []
    found = []
    for name in timm.list_pretrained(f"{network.removeprefix(TIMM_PREFIX)}.*"):
        cfg = timm.models.get_pretrained_cfg(name)
        if cfg is None or not cfg.hf_hub_id:
            continue
        size = cfg.input_size[-1] if cfg.input_size else None
        found.append(
            Published(
                network=network,
                source="timm",
                tag=name,
                # The Hugging Face cache's folder of the repository (HF_HUB_CACHE/<this>/snapshots/...).
                file_name="models--" + cfg.hf_hub_id.replace("/", "--"),
                url=f"https://huggingface.co/{cfg.hf_hub_id}",
                hash_prefix="",
                dataset=_timm_dataset(name),
                licence=cfg.license or "",
                mean=tuple(cfg.mean) if cfg.mean else None,
                std=tuple(cfg.std) if cfg.std else None,
                resize=round(size / cfg.crop_pct) if size and cfg.crop_pct else None,
                crop=size,
                default=not found,
            )
        )
    return found


def published_for(network: str) -> list[Published]:
    if network in NOT_PUBLISHED:
        return []
    return timm_published(network) if network.startswith(TIMM_PREFIX) else torchvision_published(network)


def published_named(network: str, tag: str) -> Published | None:
    """`network`'s published weights by tag (IMAGENET1K_V1); "DEFAULT" or "" is the library's default."""
    wanted = (lambda item: item.default) if tag in ("", "DEFAULT") else (lambda item: item.tag == tag)
    return next((item for item in published_for(network) if wanted(item)), None)
