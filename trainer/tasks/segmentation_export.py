"""A segmentation network's exports (trainer/export.py writes them; this says what differs for
segmentation): the exported models take 0..1 pixels and standardise inside (ClassScores), give
class scores, and are traced for the stored size; TorchScript and ONNX both hold every network.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from trainer.tasks.pixel_export import README, bundle_arrays, examples, files_and_use, readme_fields
from trainer.tasks.segmentation import Segmenter

__all__ = ["bundle_arrays", "examples", "format_notes", "onnx", "readme", "torchscript"]

USE = """Output: N x {num_classes} x H x W class scores; the class of a pixel is the argmax (line i+1
of labels.txt). The exported models standardise inside; the plain PyTorch model below does not.
"""
PLAIN = """    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    classes = model((images - mean) / std)["out"].argmax(1)  # images: N x 3 x H x W, 0..1
"""


def format_notes(network: str, input_shape: tuple[int, int, int], parameters: int = 0) -> dict[str, dict[str, Any]]:
    _, h, w = input_shape
    bundle = f"The weights, loaded in plain PyTorch with torchvision's {network} builder (the README shows how)."
    torchscript_note = (
        f"The whole network, scripted (torch.jit.load, or libtorch in C++), traced for {w}×{h} images "
        "(0..1 pixels, standardised inside), any batch size."
    )
    onnx_note = (
        f"The whole network (opset 17) for {w}×{h} images and any batch size, class scores out, checked "
        "with onnxruntime against PyTorch on the dataset's images."
    )
    return {
        "bundle": {"available": True, "note": bundle},
        "torchscript": {"available": True, "note": torchscript_note},
        "onnx": {"available": True, "note": onnx_note},
    }


def readme(segmenter: Segmenter, config: dict[str, Any], formats: tuple[str, ...], folder: str) -> str:
    files, use = files_and_use(formats, call="module(images).argmax(1)", opset=17, onnx_input="N x 3 x H x W")
    classes = len(segmenter.labels)
    return README.format(
        **readme_fields(segmenter, config),
        files=files,
        use=USE.format(num_classes=classes) + use,
        model_classes=classes,
        size_kwargs="",
        plain=PLAIN,
    )


class ClassScores(nn.Module):
    """A segmentation network that takes 0..1 pixels and gives its class scores (its "out")."""

    def __init__(self, segmenter: Segmenter) -> None:
        super().__init__()
        self.model = segmenter.model
        mean, std = segmenter.normalize.scale
        self.register_buffer("mean", mean.cpu().clone())
        self.register_buffer("std", std.cpu().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model((x - self.mean) / self.std)["out"]


def _compare(got: np.ndarray, want: np.ndarray, what: str) -> dict:
    scale = float(np.abs(want).max())
    report = {
        "images": len(want),
        "compared": int(want.shape[0] * want.shape[2] * want.shape[3]),  # pixels
        "max_abs_diff": float(np.abs(got - want).max()),
        "same_classes": float((got.argmax(1) == want.argmax(1)).mean()),
    }
    if report["max_abs_diff"] > 1e-4 + 1e-3 * scale or report["same_classes"] < 0.999:
        raise RuntimeError(f"the {what} model disagrees with PyTorch: {report}")
    return report


@torch.no_grad()
def _reference(segmenter: Segmenter, x: torch.Tensor) -> np.ndarray:
    return ClassScores(segmenter).eval()(x).numpy()


def torchscript(segmenter: Segmenter, x: torch.Tensor, path: Path) -> dict[str, Any]:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # jit is deprecated; the format is still the portable one
        module = torch.jit.trace(ClassScores(segmenter).eval(), x[:1])
        report = _compare(module(x).numpy(), _reference(segmenter, x), "TorchScript")
    module.save(str(path))
    return report


def onnx(segmenter: Segmenter, x: torch.Tensor, path: Path, *, network: str = "") -> dict[str, Any]:
    import onnxruntime as ort  # large: only to check an export

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            ClassScores(segmenter).eval(),
            (x[:1],),
            str(path),
            input_names=["input"],
            output_names=["scores"],
            dynamic_axes={"input": {0: "batch"}, "scores": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return _compare(session.run(None, {"input": x.numpy()})[0], _reference(segmenter, x), "ONNX")
