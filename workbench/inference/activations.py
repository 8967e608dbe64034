"""Look inside a network: the first convolution's filters and the activation maps of chosen
layers for one image, as PNG data URLs with their statistics. Without Django, like engine.py;
the web process calls it directly (one image)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from PIL import Image

from workbench.inference.engine import InferenceInputError, png_data_url

MAX_ACTIVATION_CHANNELS = 64
MAX_BARS = 100  # a 1-D output up to this size is drawn as bars (the logits of up to 100 classes)


def _grid(maps: np.ndarray, *, upscale_to: int = 48) -> np.ndarray:
    """N x H x W (or N x H x W x 3) floats -> one uint8 image of tiles, each tile min-max scaled."""
    count = maps.shape[0]
    cols = max(1, math.ceil(math.sqrt(count)))
    rows = math.ceil(count / cols)
    h, w = maps.shape[1:3]
    scale = max(1, upscale_to // max(h, w))
    th, tw = h * scale, w * scale
    colour = maps.ndim == 4
    canvas = np.full((rows * (th + 1) + 1, cols * (tw + 1) + 1) + ((3,) if colour else ()), 40, dtype=np.uint8)
    for n in range(count):
        tile = maps[n].astype(np.float64)
        lo, hi = float(tile.min()), float(tile.max())
        tile = (tile - lo) / (hi - lo) * 255 if hi > lo else np.zeros_like(tile)
        tile = np.kron(tile, np.ones((scale, scale) + ((1,) if colour else ()))).astype(np.uint8)
        r, c = divmod(n, cols)
        canvas[1 + r * (th + 1) : 1 + r * (th + 1) + th, 1 + c * (tw + 1) : 1 + c * (tw + 1) + tw] = tile
    return canvas


def _stats(values: np.ndarray) -> dict[str, float]:
    v = values.astype(np.float64)
    return {
        "min": float(v.min()),
        "max": float(v.max()),
        "mean": float(v.mean()),
        "std": float(v.std()),
        "zero_share": float((v == 0).mean()),
    }


LAYER_TYPES = (
    "Conv2d",
    "ReLU",
    "MaxPool2d",
    "AvgPool2d",
    "AdaptiveAvgPool2d",
    "BatchNorm2d",
    "Linear",
    "GELU",
    "LeakyReLU",
    "Sigmoid",
    "Tanh",
    "Hardswish",
    "SiLU",
    "Flatten",
    "Dropout",
)


def inspectable_layers(model) -> list[dict[str, str]]:
    """Leaf layers whose output can be shown, in forward order of definition."""
    return [
        {"name": name, "type": type(module).__name__}
        for name, module in model.named_modules()
        if name and not list(module.children()) and type(module).__name__ in LAYER_TYPES
    ]


def default_layers(model, count: int = 3) -> list[str]:
    layers = inspectable_layers(model)
    convs = [layer["name"] for layer in layers if layer["type"] == "Conv2d"]
    return (convs or [layer["name"] for layer in layers])[:count]


def first_conv_filters(model) -> dict[str, Any] | None:
    # torch (with the trainer) is loaded only where this runs, never by every web process
    import torch  # torch: loaded only where this runs

    conv = next((m for m in model.modules() if isinstance(m, torch.nn.Conv2d)), None)
    if conv is None:
        return None
    weight = conv.weight.detach().float().cpu().numpy()  # out x in x kh x kw
    tiles = weight.transpose(0, 2, 3, 1) if weight.shape[1] == 3 else weight.mean(axis=1)
    return {"shape": list(weight.shape), "stats": _stats(weight), "image": png_data_url(_grid(tiles))}


def _activation(name: str, module, out, labels: list[str]) -> dict[str, Any]:
    """One chosen layer's output for the image: its stats and a picture of it (or bars)."""
    if out is None:
        # A layer the forward pass never calls: timm's transformers compute attention fused
        # (scaled_dot_product_attention) and skip their attn_drop module, for one.
        message = "not reached: this network's forward pass does not call this layer, so it has no output to show"
        return {"name": name, "type": type(module).__name__, "error": message}
    values = out[0].numpy()
    entry = {"name": name, "type": type(module).__name__, "shape": list(values.shape), "stats": _stats(values)}
    if values.ndim == 1 and values.size <= MAX_BARS:
        # A short vector (the logits, a small linear layer) reads as labelled bars, not as a
        # grey square of a few pixels: its values, named by class when there is one per class.
        entry["values"] = [round(float(v), 6) for v in values]
        if values.size == len(labels):
            entry["labels"] = list(labels)
        return entry
    if values.ndim == 3:
        shown = values[:MAX_ACTIVATION_CHANNELS]
        entry["shown_channels"] = int(shown.shape[0])
    else:
        flat = values.reshape(-1)
        side = math.ceil(math.sqrt(flat.size))
        shown = np.pad(flat, (0, side * side - flat.size)).reshape(1, side, side)
        entry["shown_channels"] = 1
    entry["image"] = png_data_url(_grid(shown))
    return entry


def look_inside(classifier, image: Image.Image, layer_names: list[str]) -> dict[str, Any]:
    """The first convolution's filters, and the activation maps of the chosen layers for `image`."""
    # torch (with the trainer) is loaded only where this runs, never by every web process
    import torch  # torch: loaded only where this runs

    model = classifier.model
    modules = dict(model.named_modules())
    unknown = [name for name in layer_names if name not in modules or not name]
    if unknown:
        raise InferenceInputError(f"{unknown[0]!r} is not a layer of this network", field="layers")
    captured: dict[str, torch.Tensor] = {}
    hooks = [
        modules[name].register_forward_hook(
            lambda _m, _i, output, name=name: captured.__setitem__(name, output.detach().float().cpu())
        )
        for name in layer_names
    ]
    try:
        probs = classifier.probabilities([image])[0]
    finally:
        for hook in hooks:
            hook.remove()
    activations = [_activation(name, modules[name], captured.get(name), classifier.labels) for name in layer_names]
    top = probs.topk(min(5, len(classifier.labels)))
    return {
        "filters": first_conv_filters(model),
        "activations": activations,
        "layers": inspectable_layers(model),
        "predictions": [
            {"label": classifier.labels[i], "probability": float(p)}
            for p, i in zip(top.values.tolist(), top.indices.tolist(), strict=True)
        ],
    }
