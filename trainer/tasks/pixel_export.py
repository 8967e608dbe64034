"""What the detection and segmentation exports share: torchvision networks that take float pixels
0..1 (RGB, the stored size; the segmentation wrapper standardises inside, as the detectors do), a
README that rebuilds them with torchvision's builder, and example images from the dataset.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from trainer.tasks.base import Predictor, as_rgb

README = """This folder is a {task} model trained by the workbench ({network}, {num_classes} classes).

Files: model.safetensors (weights), labels.txt (class i on line i+1), preprocessing.json,
config.json (the training config){files}.

Input: an RGB image resized to {width}x{height} (squash), as float pixels 0..1, C x H x W.
{use}
With plain PyTorch (torch, torchvision, safetensors), from this folder:

    import torch, torchvision
    from safetensors.torch import load_file
    model = torchvision.models.get_model("{network}", weights=None, weights_backbone=None,
                                         num_classes={model_classes}{size_kwargs})
    model.load_state_dict(load_file("model.safetensors"))
    model.eval()
{plain}"""

TORCHSCRIPT_USE = """
TorchScript (model.torchscript.pt): torch.jit.load("model.torchscript.pt"), then {call}.
"""
ONNX_USE = """
ONNX (model.onnx, opset {opset}): onnxruntime.InferenceSession("model.onnx").run(None, {{"input": x}}) with
x {onnx_input} (numpy float32).
"""


def examples(predictor: Predictor, images: np.ndarray | None) -> torch.Tensor:
    """N x 3 x H x W float 0..1: the given images (uint8 N x C x H x W) or two seeded random ones."""
    if images is None or not len(images):
        c, h, w = predictor.preprocessing["input_shape"]
        generator = torch.Generator().manual_seed(0)
        batch = torch.randint(0, 256, (2, c, h, w), generator=generator, dtype=torch.uint8)
    else:
        batch = torch.from_numpy(np.ascontiguousarray(images))
    return as_rgb(batch.float() / 255)


def bundle_arrays(_predictor: Predictor) -> dict[str, np.ndarray]:
    return {}  # the networks standardise their own way: no mean image


def files_and_use(formats: tuple[str, ...], *, call: str, opset: int, onnx_input: str) -> tuple[str, str]:
    """The README's list of extra files and the words on how to call them, for the formats held."""
    files, use = "", ""
    if "torchscript" in formats:
        files += ", model.torchscript.pt"
        use += TORCHSCRIPT_USE.format(call=call)
    if "onnx" in formats:
        files += ", model.onnx"
        use += ONNX_USE.format(opset=opset, onnx_input=onnx_input)
    return files, use


def readme_fields(predictor: Predictor, config: dict[str, Any]) -> dict[str, Any]:
    pre = predictor.preprocessing
    return {
        "task": predictor.task,
        "network": config["network"],
        "num_classes": len(predictor.labels),
        "width": pre["width"],
        "height": pre["height"],
    }
