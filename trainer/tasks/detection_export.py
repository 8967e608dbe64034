"""A detector's exports (trainer/export.py writes them; this says what differs for detection).

Every detector scripts to TorchScript; ONNX holds Faster R-CNN (checked with torch 2.x and
onnxruntime): RetinaNet and FCOS fail in the exporter, and SSDlite's ONNX graph keeps a different
number of boxes than PyTorch, so they are not offered in ONNX, and the download page says so beforehand.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from trainer.protocol import DETECTION, TASK_NETWORKS
from trainer.tasks.detection import Detector, detector_side
from trainer.tasks.pixel_export import README, bundle_arrays, examples, files_and_use, readme_fields

__all__ = ["bundle_arrays", "examples", "format_notes", "onnx", "readme", "torchscript"]

ONNX_DETECTORS = tuple(name for name in TASK_NETWORKS[DETECTION] if name.startswith("fasterrcnn_"))
# A detection's boxes agree when their corners are this close (pixels) and scores this close.
BOX_TOLERANCE, SCORE_TOLERANCE = 0.5, 1e-3
# Detections below this score are left out of the comparison: a score a rounding away from the
# detector's own 0.05 floor may be kept on one side and dropped on the other.
COMPARED_SCORE = 0.1

USE = """Output: boxes (N x 4, x1 y1 x2 y2 in the input's pixels), labels (N, 1-based: label k is
line k of labels.txt; 0 is the detector's background) and scores (N, 0.05 and up), best first.
"""
PLAIN = """    detections = model([image])[0]  # image: 3 x H x W, 0..1
"""


def format_notes(network: str, input_shape: tuple[int, int, int], parameters: int = 0) -> dict[str, dict[str, Any]]:
    _, h, w = input_shape
    bundle = f"The weights, loaded in plain PyTorch with torchvision's {network} builder (the README shows how)."
    torchscript_note = (
        "The whole network, scripted (torch.jit.load, or libtorch in C++): a list of 0..1 images in, "
        "boxes, labels and scores out."
    )
    if network in ONNX_DETECTORS:
        onnx_note = (
            f"The whole detector (opset 11) for one {w}×{h} image (0..1 pixels) in, boxes, labels and "
            "scores out, checked with onnxruntime against PyTorch on the dataset's images."
        )
    else:
        onnx_note = (
            f"Not available for {network}: torch's ONNX exporter cannot export it (or its graph "
            "keeps other boxes than PyTorch); Faster R-CNN exports. TorchScript holds the whole network."
        )
    return {
        "bundle": {"available": True, "note": bundle},
        "torchscript": {"available": True, "note": torchscript_note},
        "onnx": {"available": network in ONNX_DETECTORS, "note": onnx_note},
    }


def readme(detector: Detector, config: dict[str, Any], formats: tuple[str, ...], folder: str) -> str:
    pre, network = detector.preprocessing, config["network"]
    files, use = files_and_use(formats, call="module([image])[0]", opset=11, onnx_input="3 x H x W, one image")
    # SSDlite resizes to its own fixed size; the others to the sides the trainer built them with
    # (detector_side: the dataset's, or larger for a small image), which the model's transform holds.
    size = ""
    if not network.startswith("ssdlite"):
        short, long = detector_side(network, pre["height"], pre["width"])
        size = f", min_size={short}, max_size={long}"
    return README.format(
        **readme_fields(detector, config),
        files=files,
        use=USE + use,
        model_classes=len(detector.labels) + 1,
        size_kwargs=size,
        plain=PLAIN,
    )


class Detections(nn.Module):
    """A detector's detections alone: scripted, torchvision's detectors return (losses, detections)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: list[torch.Tensor]) -> list[dict[str, torch.Tensor]]:
        return self.model(images)[1]


@torch.no_grad()
def _reference(detector: Detector, x: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    return [{k: v.float() if k != "labels" else v for k, v in d.items()} for d in detector.model(list(x))]


def _closest(g: dict, keep_g: np.ndarray, w: dict, keep_w: np.ndarray, what: str) -> tuple[float, float]:
    """The worst box and score difference from each of PyTorch's boxes to the other model's
    closest box of the same class. Not position by position: boxes of equal scores (an untrained
    detector scores many alike) may come out of NMS in either order, and paired by position two
    right answers looked 5 px apart."""
    got_boxes, got_scores, got_labels = g["boxes"][keep_g], g["scores"][keep_g], g["labels"][keep_g]
    want_boxes, want_scores = w["boxes"].numpy()[keep_w], w["scores"].numpy()[keep_w]
    worst_box = worst_score = 0.0
    for box, score, label in zip(want_boxes, want_scores, w["labels"].numpy()[keep_w], strict=True):
        same = got_labels == label
        if not same.any():
            raise RuntimeError(f"the {what} model gives other classes than PyTorch")
        distance = np.abs(got_boxes[same] - box).max(axis=1)
        nearest = int(distance.argmin())
        worst_box = max(worst_box, float(distance[nearest]))
        worst_score = max(worst_score, float(abs(got_scores[same][nearest] - score)))
    return worst_box, worst_score


def _compare(got: list[dict[str, np.ndarray]], want: list[dict[str, torch.Tensor]], what: str) -> dict:
    worst_box = worst_score = 0.0
    for g, w in zip(got, want, strict=True):
        keep_g, keep_w = g["scores"] >= COMPARED_SCORE, w["scores"].numpy() >= COMPARED_SCORE
        if keep_g.sum() != keep_w.sum():
            raise RuntimeError(
                f"the {what} model finds {int(keep_g.sum())} boxes where PyTorch finds {int(keep_w.sum())}"
            )
        if keep_w.any():
            box, score = _closest(g, keep_g, w, keep_w, what)
            worst_box, worst_score = max(worst_box, box), max(worst_score, score)
    if worst_box > BOX_TOLERANCE or worst_score > SCORE_TOLERANCE:
        raise RuntimeError(
            f"the {what} model disagrees with PyTorch: boxes {worst_box:.3g} px, scores {worst_score:.3g}"
        )
    boxes = sum(int((w["scores"] >= COMPARED_SCORE).sum()) for w in want)
    report = {"images": len(want), "boxes": boxes, "compared": boxes, "max_box_diff": worst_box}
    if not boxes:  # both found none: that agrees, but it says nothing of the boxes (trainer.export.judged)
        report["not_checked"] = (
            f"PyTorch found no box scored {COMPARED_SCORE:g} or more on the {len(want)} images, so there were "
            "no boxes to compare (a detector that has not learnt yet finds none)"
        )
    return {**report, "max_score_diff": worst_score}


def torchscript(detector: Detector, x: torch.Tensor, path: Path) -> dict[str, Any]:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # jit is deprecated; the format is still the portable one
        module = torch.jit.script(Detections(detector.model.eval()))
        got = [{k: v.numpy() for k, v in d.items()} for d in module(list(x))]
        report = _compare(got, _reference(detector, x), "TorchScript")
    module.save(str(path))
    return report


def onnx(detector: Detector, x: torch.Tensor, path: Path, *, network: str) -> dict[str, Any]:
    import onnxruntime as ort  # large: only to check an export

    if network not in ONNX_DETECTORS:
        raise ValueError(f"format: {network or 'this network'} cannot be exported to ONNX (TorchScript holds it)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # torchvision's detectors export with opset 11, one image per call (their own recipe).
        torch.onnx.export(
            detector.model.eval(),
            ([x[0]],),
            str(path),
            input_names=["input"],
            output_names=["boxes", "labels", "scores"],
            opset_version=11,
            dynamo=False,
        )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = [
        dict(zip(("boxes", "labels", "scores"), session.run(None, {"input": image.numpy()}), strict=True))
        for image in x
    ]
    return _compare(got, _reference(detector, x), "ONNX")
