"""The model zoo beyond torchvision's builders: a curated list of timm's classifiers, small
variants of the families practitioners fine-tune (ConvNeXt, EfficientNet/V2, RegNet, ResNet-RS,
ViT, DeiT, Swin, MobileNetV4), named `timm/<timm name>` so they never clash with torchvision's
`resnet18` or `efficientnet_b0`.

This module is plain data (the web form, the validators and the config read it without loading
torch); `build_timm` creates a network, loading timm only where one is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TIMM_PREFIX = "timm/"


@dataclass(frozen=True)
class ZooNetwork:
    family: str
    description: str
    # How the images must be sized: ViT/DeiT cut them into patches, Swin also merges patches
    # three times (a side must divide by patch * 8); convolutional networks need a minimum side,
    # found by bisection on the meta device (trainer.networks.check_input_size).
    multiple: int = 1
    # The smallest side its stem and stages take (ConvNeXt's 4x4 stem and three 2x2 downsamplings
    # need 32): said at once, without the bisection on meta tensors that finds it otherwise.
    min_side: int = 1

    @property
    def sizes(self) -> str:
        if self.multiple > 1:
            return f"sides that are multiples of {self.multiple}; designed for 224×224"
        if self.min_side > 1:
            return f"designed for 224×224; needs at least {self.min_side}×{self.min_side}"
        return "designed for 224×224"


def _conv(family: str, text: str, min_side: int = 1) -> ZooNetwork:
    return ZooNetwork(family, text, min_side=min_side)


def _patches(family: str, text: str, multiple: int) -> ZooNetwork:
    return ZooNetwork(family, text, multiple)


ZOO: dict[str, ZooNetwork] = {
    "convnext_atto": _conv("ConvNeXt", "ConvNeXt atto: a modernised ResNet, the smallest.", 32),
    "convnext_femto": _conv("ConvNeXt", "ConvNeXt femto: a modernised ResNet.", 32),
    "convnext_pico": _conv("ConvNeXt", "ConvNeXt pico: a modernised ResNet.", 32),
    "convnext_nano": _conv("ConvNeXt", "ConvNeXt nano: a strong small ConvNet.", 32),
    "convnext_tiny": _conv("ConvNeXt", "ConvNeXt tiny: the ResNet-50-sized ConvNeXt.", 32),
    "efficientnet_b0": _conv("EfficientNet", "EfficientNet-B0 (timm): compound-scaled MBConv blocks."),
    "efficientnet_b1": _conv("EfficientNet", "EfficientNet-B1: B0 scaled up (240×240)."),
    "efficientnet_b2": _conv("EfficientNet", "EfficientNet-B2: B0 scaled up (260×260)."),
    "efficientnetv2_rw_t": _conv("EfficientNetV2", "EfficientNetV2 tiny (timm's): fused MBConv early."),
    "tf_efficientnetv2_b0": _conv("EfficientNetV2", "EfficientNetV2-B0: fused MBConv, quick to train."),
    "tf_efficientnetv2_s": _conv("EfficientNetV2", "EfficientNetV2-S: fused MBConv, accurate."),
    "regnetx_002": _conv("RegNet", "RegNetX 200MF: a designed-space ResNeXt, tiny."),
    "regnetx_004": _conv("RegNet", "RegNetX 400MF: a designed-space ResNeXt."),
    "regnety_002": _conv("RegNet", "RegNetY 200MF: RegNetX with squeeze-excitation."),
    "regnety_004": _conv("RegNet", "RegNetY 400MF: RegNetX with squeeze-excitation."),
    "regnety_008": _conv("RegNet", "RegNetY 800MF: RegNetX with squeeze-excitation."),
    "regnety_016": _conv("RegNet", "RegNetY 1.6GF: RegNetX with squeeze-excitation."),
    "resnet18d": _conv("ResNet", "ResNet-18-D (timm): a deep stem and average-pool shortcuts."),
    "resnet50d": _conv("ResNet", "ResNet-50-D (timm): a deep stem and average-pool shortcuts."),
    "resnetrs50": _conv("ResNet-RS", "ResNet-RS-50: ResNet re-scaled and re-trained, SE blocks."),
    "resnetrs101": _conv("ResNet-RS", "ResNet-RS-101: ResNet re-scaled and re-trained, SE blocks."),
    "vit_tiny_patch16_224": _patches("ViT", "ViT-Ti/16: a vision transformer on 16×16 patches.", 16),
    "vit_small_patch16_224": _patches("ViT", "ViT-S/16: a vision transformer on 16×16 patches.", 16),
    "vit_base_patch16_224": _patches("ViT", "ViT-B/16 (timm): wants lots of data or pretrained weights.", 16),
    "deit_tiny_patch16_224": _patches("DeiT", "DeiT-Ti: ViT trained data-efficiently (the DeiT recipe).", 16),
    "deit_small_patch16_224": _patches("DeiT", "DeiT-S: ViT trained data-efficiently.", 16),
    "deit_tiny_distilled_patch16_224": _patches("DeiT", "DeiT-Ti distilled: with a distillation token.", 16),
    "swin_tiny_patch4_window7_224": _patches("Swin", "Swin-T: shifted-window attention, hierarchical.", 32),
    "swin_small_patch4_window7_224": _patches("Swin", "Swin-S: shifted-window attention, hierarchical.", 32),
    "mobilenetv4_conv_small": _conv("MobileNetV4", "MobileNetV4 conv small: for phones and CPUs."),
    "mobilenetv4_conv_medium": _conv("MobileNetV4", "MobileNetV4 conv medium: universal inverted bottlenecks."),
    "mobilenetv4_hybrid_medium": _conv("MobileNetV4", "MobileNetV4 hybrid medium: convolutions and attention."),
}
# The names a config may give, in the form's order.
TIMM_NETWORKS = tuple(TIMM_PREFIX + name for name in ZOO)


def is_timm(network: str) -> bool:
    return network.startswith(TIMM_PREFIX)


def zoo_entry(network: str) -> ZooNetwork:
    """The zoo's entry for `timm/<name>`; KeyError for a name the zoo does not list."""
    return ZOO[network.removeprefix(TIMM_PREFIX)]


def network_family(network: str) -> str:
    """What the form's network picker searches besides the name: "timm ConvNeXt", "torchvision"."""
    if is_timm(network):
        return f"timm {zoo_entry(network).family}"
    return "workbench" if network in ("lenet", "custom") else "torchvision"


def timm_name(network: str) -> str:
    """timm's own name of `timm/<name>` (what `timm.create_model` and the hub know it by)."""
    zoo_entry(network)
    return network.removeprefix(TIMM_PREFIX)


def size_problem(network: str, height: int, width: int) -> str | None:
    """Why `network` cannot take height x width images by its patch rule or least side, or None."""
    entry = zoo_entry(network)
    if min(height, width) < entry.min_side:
        return f"{network} needs images of at least {entry.min_side}x{entry.min_side}, dataset is {width}x{height}"
    multiple = entry.multiple
    if multiple == 1 or (height % multiple == 0 and width % multiple == 0):
        return None
    side = min(height, width) // multiple * multiple
    fix = f"set data.crop_size to {side}" if side else f"rebuild the dataset at {multiple}x{multiple} or more"
    return (
        f"{network} needs sides that are multiples of {multiple} (its patch grid), dataset is {width}x{height}; {fix}"
    )


def side_problem(network: str, side: int) -> str | None:
    """Why `network` cannot take side x side images, in benchmark mode's words (its synthetic
    images' `image_size`), naming the sides it takes; None when it can."""
    entry = zoo_entry(network)
    if side < entry.min_side:
        return f"{network} needs images of at least {entry.min_side}x{entry.min_side}: use {entry.min_side} or more"
    multiple = entry.multiple
    if multiple == 1 or side % multiple == 0:
        return None
    below, above = side // multiple * multiple, (side // multiple + 1) * multiple
    sides = f"{below} or {above}" if below else str(above)
    return f"{network} needs sides that are multiples of {multiple} (its patch grid): use {sides}"


def build_timm(network: str, *, channels: int, height: int, width: int, num_classes: int) -> Any:
    """`timm.create_model(name, pretrained=False, ...)` for the dataset's channels and classes;
    transformers are built for the images' own size (their position embeddings depend on it)."""
    # timm (a second of imports) is loaded only where a zoo network is built
    import timm  # timm: loaded only where this runs
    import torch  # torch: loaded only where this runs

    extra: dict[str, Any] = {}
    if zoo_entry(network).multiple > 1:
        extra["img_size"] = (height, width)
    name = timm_name(network)
    if torch.get_default_device().type == "meta" and name.startswith("regnet"):
        # RegNet derives its widths with torch.unique, which has no meta kernel: it is built on
        # the CPU (a few million parameters, a fraction of a second) and moved to meta, shapes only.
        with torch.device("cpu"):
            model = timm.create_model(name, pretrained=False, num_classes=num_classes, in_chans=channels, **extra)
        return model.to("meta")
    return timm.create_model(name, pretrained=False, num_classes=num_classes, in_chans=channels, **extra)
