"""Exports of a detector's or segmentation network's checkpoint (trainer/export.py does the
classifiers'): a bundle (safetensors, labels, preprocessing, config, README), TorchScript and ONNX
where the network allows, each checked against PyTorch on example images (ONNX with onnxruntime).

Both exported models take float pixels 0..1 (RGB, the stored size): the segmentation wrapper
standardises inside, as the detectors do. What exports (checked with torch 2.x and onnxruntime):
every network scripts to TorchScript; ONNX holds the segmentation networks and Faster R-CNN.
RetinaNet and FCOS fail in the exporter, and SSDlite's ONNX graph keeps a different number of
boxes than PyTorch, so they are not offered in ONNX, and the download page says so beforehand.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn

from trainer.checkpoint import CheckpointStore
from trainer.inference import Detector, Segmenter, load_checkpoint_predictor
from trainer.protocol import DETECTION, SEGMENTATION, TASK_NETWORKS
from trainer.tasks.base import as_rgb

ONNX_DETECTORS = tuple(name for name in TASK_NETWORKS[DETECTION] if name.startswith("fasterrcnn_"))
# A detection's boxes agree when their corners are this close (pixels) and scores this close.
BOX_TOLERANCE, SCORE_TOLERANCE = 0.5, 1e-3
# Detections below this score are left out of the comparison: a score a rounding away from the
# detector's own 0.05 floor may be kept on one side and dropped on the other.
COMPARED_SCORE = 0.1

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

DETECTION_USE = """Output: boxes (N x 4, x1 y1 x2 y2 in the input's pixels), labels (N, 1-based: label k is
line k of labels.txt; 0 is the detector's background) and scores (N, 0.05 and up), best first.
"""
SEGMENTATION_USE = """Output: N x {num_classes} x H x W class scores; the class of a pixel is the argmax (line i+1
of labels.txt). The exported models standardise inside; the plain PyTorch model below does not.
"""
DETECTION_PLAIN = """    detections = model([image])[0]  # image: 3 x H x W, 0..1
"""
SEGMENTATION_PLAIN = """    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    classes = model((images - mean) / std)["out"].argmax(1)  # images: N x 3 x H x W, 0..1
"""
TORCHSCRIPT_USE = """
TorchScript (model.torchscript.pt): torch.jit.load("model.torchscript.pt"), then {call}.
"""
ONNX_USE = """
ONNX (model.onnx, opset {opset}): onnxruntime.InferenceSession("model.onnx").run(None, {{"input": x}}) with
x {onnx_input} (numpy float32).
"""


def task_format_notes(task: str, network: str, input_shape: tuple[int, int, int]) -> dict[str, dict[str, Any]]:
    """What each export format holds for a detector or segmentation network, before anyone asks:
    {format: {"available": bool, "note": str}}; an unavailable format names the reason."""
    _, h, w = input_shape
    bundle = f"The weights, loaded in plain PyTorch with torchvision's {network} builder (the README shows how)."
    script = "The whole network, scripted (torch.jit.load, or libtorch in C++)"
    if task == DETECTION:
        torchscript = f"{script}: a list of 0..1 images in, boxes, labels and scores out."
        if network in ONNX_DETECTORS:
            onnx = (f"The whole detector (opset 11) for one {w}×{h} image (0..1 pixels) in, boxes, labels and "
                    "scores out, checked with onnxruntime against PyTorch on the dataset's images.")  # fmt: skip
            onnx_ok = True
        else:
            onnx = (f"Not available for {network}: torch's ONNX exporter cannot export it (or its graph keeps other "
                    "boxes than PyTorch); Faster R-CNN exports. TorchScript holds the whole network.")  # fmt: skip
            onnx_ok = False
    else:
        torchscript = f"{script}, traced for {w}×{h} images (0..1 pixels, standardised inside), any batch size."
        onnx = (f"The whole network (opset 17) for {w}×{h} images and any batch size, class scores out, checked "
                "with onnxruntime against PyTorch on the dataset's images.")  # fmt: skip
        onnx_ok = True
    return {
        "bundle": {"available": True, "note": bundle},
        "torchscript": {"available": True, "note": torchscript},
        "onnx": {"available": onnx_ok, "note": onnx},
    }


class Detections(nn.Module):
    """A detector's detections alone: scripted, torchvision's detectors return (losses, detections)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: list[torch.Tensor]) -> list[dict[str, torch.Tensor]]:
        return self.model(images)[1]


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


def _examples(predictor, examples: np.ndarray | None) -> torch.Tensor:
    """N x 3 x H x W float 0..1: the given images (uint8 N x C x H x W) or two seeded random ones."""
    if examples is None or not len(examples):
        c, h, w = predictor.preprocessing["input_shape"]
        generator = torch.Generator().manual_seed(0)
        batch = torch.randint(0, 256, (2, c, h, w), generator=generator, dtype=torch.uint8)
    else:
        batch = torch.from_numpy(np.ascontiguousarray(examples))
    return as_rgb(batch.float() / 255)


def _compare_detections(got: list[dict[str, np.ndarray]], want: list[dict[str, torch.Tensor]], what: str) -> dict:
    worst_box = worst_score = 0.0
    for g, w in zip(got, want, strict=True):
        keep_g, keep_w = g["scores"] >= COMPARED_SCORE, w["scores"].numpy() >= COMPARED_SCORE
        if keep_g.sum() != keep_w.sum():
            raise RuntimeError(
                f"the {what} model finds {int(keep_g.sum())} boxes where PyTorch finds {int(keep_w.sum())}"
            )
        if keep_w.any():
            worst_box = max(worst_box, float(np.abs(g["boxes"][keep_g] - w["boxes"].numpy()[keep_w]).max()))
            worst_score = max(worst_score, float(np.abs(g["scores"][keep_g] - w["scores"].numpy()[keep_w]).max()))
            if not (g["labels"][keep_g] == w["labels"].numpy()[keep_w]).all():
                raise RuntimeError(f"the {what} model gives other classes than PyTorch")
    if worst_box > BOX_TOLERANCE or worst_score > SCORE_TOLERANCE:
        raise RuntimeError(
            f"the {what} model disagrees with PyTorch: boxes {worst_box:.3g} px, scores {worst_score:.3g}"
        )
    return {"images": len(want), "boxes": sum(int((w["scores"] >= COMPARED_SCORE).sum()) for w in want),
            "max_box_diff": worst_box, "max_score_diff": worst_score}  # fmt: skip


def _compare_scores(got: np.ndarray, want: np.ndarray, what: str) -> dict:
    scale = float(np.abs(want).max())
    report = {
        "images": len(want),
        "max_abs_diff": float(np.abs(got - want).max()),
        "same_classes": float((got.argmax(1) == want.argmax(1)).mean()),
    }
    if report["max_abs_diff"] > 1e-4 + 1e-3 * scale or report["same_classes"] < 0.999:
        raise RuntimeError(f"the {what} model disagrees with PyTorch: {report}")
    return report


@torch.no_grad()
def _reference(predictor, x: torch.Tensor) -> Any:
    if isinstance(predictor, Detector):
        return [{k: v.float() if k != "labels" else v for k, v in d.items()} for d in predictor.model(list(x))]
    return ClassScores(predictor).eval()(x).numpy()


def export_torchscript(predictor, x: torch.Tensor, path: Path) -> dict:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # jit is deprecated; the format is still the portable one
        if isinstance(predictor, Detector):
            module = torch.jit.script(Detections(predictor.model.eval()))
            got = [{k: v.numpy() for k, v in d.items()} for d in module(list(x))]
            report = _compare_detections(got, _reference(predictor, x), "TorchScript")
        else:
            module = torch.jit.trace(ClassScores(predictor).eval(), x[:1])
            report = _compare_scores(module(x).numpy(), _reference(predictor, x), "TorchScript")
    module.save(str(path))
    return report


def export_onnx(predictor, network: str, x: torch.Tensor, path: Path) -> dict:
    # onnxruntime is large and needed only to check an ONNX export
    import onnxruntime as ort  # large: only to check an export

    detector = isinstance(predictor, Detector)
    if detector and network not in ONNX_DETECTORS:
        raise ValueError(f"format: {network} cannot be exported to ONNX (TorchScript holds it)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if detector:
            # torchvision's detectors export with opset 11, one image per call (their own recipe).
            torch.onnx.export(predictor.model.eval(), ([x[0]],), str(path), input_names=["input"],
                              output_names=["boxes", "labels", "scores"], opset_version=11, dynamo=False)  # fmt: skip
        else:
            torch.onnx.export(ClassScores(predictor).eval(), (x[:1],), str(path), input_names=["input"],
                              output_names=["scores"], dynamic_axes={"input": {0: "batch"}, "scores": {0: "batch"}},
                              opset_version=17, dynamo=False)  # fmt: skip
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    if detector:
        got = [dict(zip(("boxes", "labels", "scores"), session.run(None, {"input": image.numpy()}), strict=True))
               for image in x]  # fmt: skip
        return _compare_detections(got, _reference(predictor, x), "ONNX")
    return _compare_scores(session.run(None, {"input": x.numpy()})[0], _reference(predictor, x), "ONNX")


def export_task_run(
    checkpoint: str | Path, out: str | Path, formats: tuple[str, ...], examples: np.ndarray | None = None
) -> dict[str, Any]:
    """The bundle, plus TorchScript and ONNX when asked, in `out`; each model checked against
    PyTorch on `examples` (uint8 N x C x H x W, the dataset's images) or two random images."""
    predictor = load_checkpoint_predictor(checkpoint)
    config = CheckpointStore.load(checkpoint)["config"]
    network = config["network"]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    x = _examples(predictor, examples)
    result: dict[str, Any] = {"bundle": str(_bundle(predictor, config, out, formats))}
    if "torchscript" in formats:
        result["torchscript_check"] = export_torchscript(predictor, x, out / "model.torchscript.pt")
    if "onnx" in formats:
        result["onnx_check"] = export_onnx(predictor, network, x, out / "model.onnx")
    return result


def _bundle(predictor, config: dict[str, Any], out: Path, formats: tuple[str, ...]) -> Path:
    state = {k: v.detach().cpu().contiguous() for k, v in predictor.model.state_dict().items()}
    save_file(state, out / "model.safetensors")
    (out / "labels.txt").write_text("".join(f"{label}\n" for label in predictor.labels), encoding="utf-8")
    (out / "preprocessing.json").write_text(json.dumps(predictor.preprocessing, indent=2), encoding="utf-8")
    # The server's folders stay on the server: the bundle keeps only the names of what it trained on.
    config = {**config, "run_dir": Path(config.get("run_dir") or "").name}
    if isinstance(config.get("data"), dict) and config["data"].get("dataset"):
        config["data"] = {**config["data"], "dataset": Path(config["data"]["dataset"]).name}
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    detector = isinstance(predictor, Detector)
    pre, classes, network = predictor.preprocessing, len(predictor.labels), config["network"]
    use = DETECTION_USE if detector else SEGMENTATION_USE.format(num_classes=classes)
    files = ""
    if "torchscript" in formats:
        files += ", model.torchscript.pt"
        use += TORCHSCRIPT_USE.format(call="module([image])[0]" if detector else "module(images).argmax(1)")
    if "onnx" in formats:
        files += ", model.onnx"
        use += ONNX_USE.format(
            opset=11 if detector else 17, onnx_input="3 x H x W, one image" if detector else "N x 3 x H x W"
        )
    size = "" if network.startswith("ssdlite") else f", min_size={min(pre['height'], pre['width'])}, " \
        f"max_size={max(pre['height'], pre['width'])}"  # fmt: skip
    (out / "README.txt").write_text(
        README.format(
            task=DETECTION if detector else SEGMENTATION,
            network=network,
            num_classes=classes,
            files=files,
            width=pre["width"],
            height=pre["height"],
            use=use,
            model_classes=classes + 1 if detector else classes,
            size_kwargs=size if detector else "",
            plain=DETECTION_PLAIN if detector else SEGMENTATION_PLAIN,
        ),
        encoding="utf-8",
    )
    return out
