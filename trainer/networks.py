"""Networks by name: the classics (LeNet, AlexNet, GoogLeNet) and torchvision's modern builders,
adapted to the dataset's channels and image size, plus fine-tuning from a state_dict.

A network that cannot take the image size says so before training starts (`check_input_size`
runs a forward pass on the meta device: no memory, no compute).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torchvision
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from trainer.config import ConfigError
from trainer.custom_net import build_custom
from trainer.weights_file import WeightsFileError, read_state_dict
from trainer.zoo import TIMM_NETWORKS, build_timm, is_timm, size_problem

log = logging.getLogger(__name__)


class NetworkError(ValueError):
    """The network cannot be built for this dataset (the message says why and what to change)."""


class LeNet(nn.Module):
    """Caffe/DIGITS LeNet (conv20-pool-conv50-pool-fc500-fc), for any channels and size >= 4x4.

    'same' padding keeps 8x8 digits usable (Caffe's valid 5x5 convs need 28x28); the adaptive pool
    caps the flattened size at 50x7x7 so large images do not create a giant first FC layer.
    """

    def __init__(self, channels: int, num_classes: int, height: int, width: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, 20, kernel_size=5, padding=2),
            nn.MaxPool2d(2),
            nn.Conv2d(20, 50, kernel_size=5, padding=2),
            nn.MaxPool2d(2),
        )
        out_h, out_w = min(height // 4, 7), min(width // 4, 7)
        self.pool = nn.AdaptiveAvgPool2d((max(out_h, 1), max(out_w, 1)))
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(50 * max(out_h, 1) * max(out_w, 1), 500),
            nn.ReLU(inplace=True),
            nn.Linear(500, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.pool(self.features(x)))


@dataclass(frozen=True)
class InputSpec:
    channels: int
    height: int
    width: int
    num_classes: int
    custom_layers: list = field(default_factory=list)


def _torchvision(name: str, **extra) -> Callable[[InputSpec], nn.Module]:
    def build(spec: InputSpec) -> nn.Module:
        return torchvision.models.get_model(name, weights=None, num_classes=spec.num_classes, **extra)

    return build


def _lenet(spec: InputSpec) -> nn.Module:
    if spec.height < 4 or spec.width < 4:
        raise NetworkError(f"lenet needs images of at least 4x4, dataset is {spec.width}x{spec.height}")
    return LeNet(spec.channels, spec.num_classes, spec.height, spec.width)


def _vit(spec: InputSpec) -> nn.Module:
    # torchvision's ViT takes one square size that must be a multiple of the 16-pixel patch.
    if spec.height != spec.width or spec.height % 16:
        side = min(spec.height, spec.width) // 16 * 16
        fix = f"set data.crop_size to {side}" if side else "rebuild the dataset at 16x16 or more"
        raise NetworkError(
            f"vit_b_16 needs square images whose side is a multiple of 16, dataset is {spec.width}x{spec.height}; {fix}"
        )
    return torchvision.models.vit_b_16(weights=None, num_classes=spec.num_classes, image_size=spec.height)


def _timm(name: str) -> Callable[[InputSpec], nn.Module]:
    def build(spec: InputSpec) -> nn.Module:
        # timm takes the channels itself (in_chans: an RGB stem's weights summed for gray)
        problem = size_problem(name, spec.height, spec.width)
        if problem:
            raise NetworkError(problem)
        return build_timm(
            name, channels=spec.channels, height=spec.height, width=spec.width, num_classes=spec.num_classes
        )

    return build


def _custom(spec: InputSpec) -> nn.Module:
    return build_custom(spec.custom_layers, spec.channels, spec.height, spec.width, spec.num_classes)


BUILDERS: dict[str, Callable[[InputSpec], nn.Module]] = {
    "lenet": _lenet,
    "alexnet": _torchvision("alexnet"),
    "googlenet": _torchvision("googlenet", aux_logits=False, init_weights=True),
    "resnet18": _torchvision("resnet18"),
    "resnet34": _torchvision("resnet34"),
    "resnet50": _torchvision("resnet50"),
    "vgg16": _torchvision("vgg16"),
    "mobilenet_v3_small": _torchvision("mobilenet_v3_small"),
    "mobilenet_v3_large": _torchvision("mobilenet_v3_large"),
    "efficientnet_b0": _torchvision("efficientnet_b0"),
    "vit_b_16": _vit,
    **{name: _timm(name) for name in TIMM_NETWORKS},
    "custom": _custom,
}


def _adapt_first_conv(model: nn.Module, channels: int) -> None:
    """Swap the stem's 3-channel conv for a `channels`-input one (the torchvision nets are RGB)."""
    for name, module in model.named_modules():
        if isinstance(module, nn.Conv2d):
            parent_name, _, child_name = name.rpartition(".")
            replacement = nn.Conv2d(
                channels,
                module.out_channels,
                module.kernel_size,
                module.stride,
                module.padding,
                module.dilation,
                1,
                module.bias is not None,
                module.padding_mode,
                device=module.weight.device,
                dtype=module.weight.dtype,
            )
            setattr(model.get_submodule(parent_name), child_name, replacement)
            return
    raise NetworkError("no convolution found to adapt to the input channels")


def build_model(name: str, spec: InputSpec) -> nn.Module:
    """Build `name` for `spec`; fails loudly listing the known names."""
    try:
        builder = BUILDERS[name]
    except KeyError:
        raise NetworkError(f"network: {name!r} is not one of {', '.join(BUILDERS)}") from None
    model = builder(spec)
    if name not in ("lenet", "custom") and not is_timm(name) and spec.channels != 3:
        _adapt_first_conv(model, spec.channels)
    return model


def _forward_ok(name: str, spec: InputSpec, height: int, width: int) -> str | None:
    with torch.device("meta"):
        model = build_model(name, InputSpec(spec.channels, height, width, spec.num_classes, spec.custom_layers))
    model.eval()
    try:
        out = model(torch.empty(2, spec.channels, height, width, device="meta"))
    except (RuntimeError, ValueError, AssertionError) as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if tuple(out.shape) != (2, spec.num_classes):
        return f"output shape {tuple(out.shape)} is not (batch, {spec.num_classes})"
    return None


def check_input_size(name: str, spec: InputSpec) -> None:
    """Raise NetworkError (naming the smallest size that works) if `name` cannot take `spec`'s images."""
    if name in ("vit_b_16", "lenet", "custom"):
        with torch.device("meta"):
            build_model(name, spec)  # these builders check sizes themselves
        if name != "custom":
            return
    problem = _forward_ok(name, spec, spec.height, spec.width)
    if problem is None:
        return
    if name == "custom":
        raise NetworkError(f"custom network fails on {spec.width}x{spec.height} images: {problem}")
    low, high = max(spec.height, spec.width), 1024
    if _forward_ok(name, spec, high, high) is not None:
        raise NetworkError(f"{name} cannot run on {spec.width}x{spec.height} images: {problem}")
    while low < high:  # the smallest square side that works, by bisection on meta tensors
        mid = (low + high) // 2
        if _forward_ok(name, spec, mid, mid) is None:
            high = mid
        else:
            low = mid + 1
    raise NetworkError(f"{name} needs images of at least {low}x{low}, dataset is {spec.width}x{spec.height}")


def network_cost(name: str, spec: InputSpec) -> tuple[int, float]:
    """(parameters, GFLOPs of one image's forward pass) of `name` for `spec`, counted on the meta
    device (no memory, no compute): what the new-run form's network table shows. A multiply-add
    counts as one FLOP, as the model cards do."""
    with torch.device("meta"):
        model = build_model(name, spec).eval()
    params = sum(p.numel() for p in model.parameters())
    with FlopCounterMode(display=False) as counter:
        model(torch.empty(1, spec.channels, spec.height, spec.width, device="meta"))
    return params, counter.get_total_flops() / 2 / 1e9


def load_pretrained(model: nn.Module, path: str) -> tuple[list[str], list[str]]:
    """Fine-tuning: copy every tensor whose name and shape match; returns (loaded, skipped).

    The head (a different number of classes) is skipped, so it keeps its fresh initialisation.
    RGB stem weights are summed over the input channels for a gray model, which keeps the
    filter's response to a gray image unchanged.
    """
    try:
        # The one reader of weights files (trainer/weights_file.py): the format by content, the
        # inflate limits, tensors only, unwrapped; the same rule the workbench's doors applied.
        state = read_state_dict(path)
    except WeightsFileError as error:
        raise ConfigError(str(error), field="pretrained") from None
    own = model.state_dict()
    loaded, skipped = [], []
    for key, target in own.items():
        source = state.get(key)
        if source is None:
            skipped.append(key)
            continue
        if (
            source.shape != target.shape
            and source.ndim == 4
            and source.shape[1] == 3
            and target.shape[1] == 1
            and source.shape[0] == target.shape[0]
            and source.shape[2:] == target.shape[2:]
        ):
            source = source.sum(dim=1, keepdim=True)
        if source.shape == target.shape:
            own[key] = source.to(target.dtype)
            loaded.append(key)
        else:
            skipped.append(key)
    if not loaded:
        # Training from scratch while the user asked for weights is a silent wrong answer ("loaded 0
        # tensors, skipped 8"): refused, naming what the file and the network hold.
        theirs = ", ".join(sorted(state)[:3]) + ("..." if len(state) > 3 else "")
        raise ConfigError(
            f"{Path(path).name} matches none of the network's {len(own)} tensors by name and shape "
            f"(the file holds {len(state)}: {theirs or 'none'}); choose weights of the same network",
            field="pretrained",
        )
    model.load_state_dict(own)
    unused = sorted(set(state) - set(own))
    # No file name: these lines reach the run page, where the file is the server's business
    # (the page names the run or upload the weights came from).
    log.info(
        "pretrained weights: loaded %d tensors, skipped %d (%s), unused in file %d",
        len(loaded),
        len(skipped),
        ", ".join(skipped[:6]) + ("..." if len(skipped) > 6 else ""),
        len(unused),
    )
    return loaded, skipped
