"""A declarative network: a list of layers such as
`{"type": "conv2d", "out_channels": 16, "kernel_size": 3, "padding": 1}`, validated layer by layer
(unknown types and parameters are named) with the output shape of every layer computed, so the
web form can show shapes while the user edits (`layer_shapes`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import nn


class CustomNetError(ValueError):
    """A layer spec is wrong; the message names the layer index, type and parameter."""


Shape = tuple[int, ...]  # without the batch dimension

MAX_LAYERS = 256
# A billion parameters: ~16 GB to train (fp32 weights, gradients and Adam's two moments), more than
# most single GPUs hold; the largest built-in network (VGG-16) has 138 million.
MAX_PARAMETERS = 1_000_000_000


def training_bytes(parameters: int) -> int:
    """Memory the weights need while training, activations aside: fp32 weights, gradients and an
    optimizer's two moments (Adam), 16 bytes a parameter."""
    return parameters * 16


def _conv(shape: Shape, p: dict) -> nn.Module:
    return nn.Conv2d(
        shape[0],
        p["out_channels"],
        p["kernel_size"],
        stride=p.get("stride", 1),
        padding=p.get("padding", 0),
        dilation=p.get("dilation", 1),
        groups=p.get("groups", 1),
        bias=p.get("bias", True),
    )


def _linear(shape: Shape, p: dict) -> nn.Module:
    return nn.Linear(shape[0], p["out_features"], bias=p.get("bias", True))


def _batch_norm(shape: Shape, p: dict) -> nn.Module:
    kind = nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d
    return kind(shape[0], eps=p.get("eps", 1e-5), momentum=p.get("momentum", 0.1))


# type -> (builder(input shape, params), required params, optional params, input rank or None)
LAYERS: dict[str, tuple[Callable[[Shape, dict], nn.Module], set[str], set[str], int | None]] = {
    "conv2d": (_conv, {"out_channels", "kernel_size"}, {"stride", "padding", "dilation", "groups", "bias"}, 3),
    "linear": (_linear, set(), {"out_features", "bias"}, 1),  # the last one defaults to the classes
    "batch_norm": (_batch_norm, set(), {"eps", "momentum"}, None),
    "relu": (lambda s, p: nn.ReLU(inplace=p.get("inplace", False)), set(), {"inplace"}, None),
    "leaky_relu": (lambda s, p: nn.LeakyReLU(p.get("negative_slope", 0.01)), set(), {"negative_slope"}, None),
    "gelu": (lambda s, p: nn.GELU(), set(), set(), None),
    "sigmoid": (lambda s, p: nn.Sigmoid(), set(), set(), None),
    "tanh": (lambda s, p: nn.Tanh(), set(), set(), None),
    "max_pool": (
        lambda s, p: nn.MaxPool2d(p["kernel_size"], p.get("stride"), p.get("padding", 0)),
        {"kernel_size"},
        {"stride", "padding"},
        3,
    ),
    "avg_pool": (
        lambda s, p: nn.AvgPool2d(p["kernel_size"], p.get("stride"), p.get("padding", 0)),
        {"kernel_size"},
        {"stride", "padding"},
        3,
    ),
    "adaptive_avg_pool": (lambda s, p: nn.AdaptiveAvgPool2d(p.get("output_size", 1)), set(), {"output_size"}, 3),
    "dropout": (lambda s, p: nn.Dropout(p.get("p", 0.5)), set(), {"p"}, None),
    "flatten": (lambda s, p: nn.Flatten(), set(), set(), None),
}


def _check_layer(i: int, layer: Any) -> tuple[str, dict]:
    if not isinstance(layer, dict) or "type" not in layer:
        raise CustomNetError(f"layer {i}: expected an object with a 'type'")
    kind = layer["type"]
    if kind not in LAYERS:
        raise CustomNetError(f"layer {i}: type {kind!r} is not one of {', '.join(LAYERS)}")
    _, required, optional, _ = LAYERS[kind]
    params = {k: v for k, v in layer.items() if k != "type"}
    unknown = sorted(set(params) - required - optional)
    if unknown:
        allowed = ", ".join(sorted(required | optional)) or "none"
        raise CustomNetError(f"layer {i} ({kind}): unknown parameter {unknown[0]!r} (allowed: {allowed})")
    missing = sorted(required - set(params))
    if missing:
        raise CustomNetError(f"layer {i} ({kind}): missing parameter {missing[0]!r}")
    return kind, params


def _copy(layers: Any) -> list:
    """The layers to plan, copied (the plan fills in defaults). The count first, before the copy:
    each layer is built on the meta device to learn its shape, and 200,000 layers cost the web
    process's shape preview 134 s of CPU."""
    if not isinstance(layers, list) or not layers:
        raise CustomNetError("custom_layers: expected a non-empty list of layers")
    if len(layers) > MAX_LAYERS:
        raise CustomNetError(f"custom_layers: {len(layers)} layers; at most {MAX_LAYERS}")
    return copy.deepcopy(layers)


def _plan(
    layers: list, channels: int, height: int, width: int, num_classes: int
) -> list[tuple[int, str, dict, Shape, Shape]]:
    """Validate every layer on the meta device; returns (index, type, params, in, out) per layer."""
    checked = [_check_layer(i, layer) for i, layer in enumerate(layers)]  # names before shapes
    last_linear = max((i for i, (kind, _) in enumerate(checked) if kind == "linear"), default=None)
    if last_linear is None:
        raise CustomNetError("custom_layers: needs a final 'linear' layer producing the class scores")
    shape: Shape = (channels, height, width)
    plan = []
    parameters = 0
    for i, (kind, params) in enumerate(checked):
        if kind == "linear" and "out_features" not in params and i != last_linear:
            raise CustomNetError(
                f"layer {i} (linear): missing parameter 'out_features' "
                "(only the last linear layer defaults to the number of classes)"
            )
        if kind == "linear" and params.get("out_features", "classes") == "classes":
            params["out_features"] = num_classes
        builder, _, _, rank = LAYERS[kind]
        if kind == "linear" and len(shape) != 1:
            raise CustomNetError(f"layer {i} (linear): input is {list(shape)}; add a 'flatten' layer before it")
        if rank is not None and len(shape) != rank:
            raise CustomNetError(f"layer {i} ({kind}): needs a C x H x W input, got {list(shape)}")
        try:
            with torch.device("meta"):  # shapes only: no memory, no compute
                module = builder(shape, params)
                out = module(torch.empty(2, *shape))
        except (TypeError, ValueError, RuntimeError, OverflowError) as exc:  # OverflowError: a 400-digit size
            raise CustomNetError(f"layer {i} ({kind}): {str(exc).splitlines()[0]} (input {list(shape)})") from None
        parameters += sum(p.numel() for p in module.parameters())
        if parameters > MAX_PARAMETERS:
            raise CustomNetError(
                f"layer {i} ({kind}): the network reaches {parameters:,} parameters here, over the limit of "
                f"{MAX_PARAMETERS:,} (about {training_bytes(parameters) / 2**30:.1f} GiB to train with Adam in "
                "fp32: weights, gradients and two moments)"
            )
        out_shape: Shape = tuple(out.shape[1:])
        if any(d <= 0 for d in out_shape):
            raise CustomNetError(f"layer {i} ({kind}): output {list(out_shape)} is empty; the image is too small")
        plan.append((i, kind, params, shape, out_shape))
        shape = out_shape
    if shape != (num_classes,):
        raise CustomNetError(f"custom_layers: the network outputs {list(shape)}, expected [{num_classes}] classes")
    return plan


def layer_shapes(layers: list, channels: int, height: int, width: int, num_classes: int) -> list[dict[str, Any]]:
    """Per-layer output shapes (batch dimension left out), for the network editor."""
    plan = _plan(_copy(layers), channels, height, width, num_classes)
    return [{"index": None, "type": "input", "shape": [channels, height, width]}] + [
        {"index": i, "type": kind, "shape": list(out)} for i, kind, _, _, out in plan
    ]


def build_custom(layers: list, channels: int, height: int, width: int, num_classes: int) -> nn.Module:
    plan = _plan(_copy(layers), channels, height, width, num_classes)
    return nn.Sequential(*(LAYERS[kind][0](shape_in, params) for _, kind, params, shape_in, _ in plan))
