"""Exports of a trained checkpoint, one path for every task: a bundle (safetensors + labels +
preprocessing + config + README, written by `write_bundle` alone), TorchScript and ONNX, each
model checked against PyTorch (ONNX with onnxruntime).

What differs between the tasks (the example inputs, the README's words, how a model is traced or
scripted, what ONNX can hold and how outputs are compared) is the task's export
(trainer/tasks/<task>_export.py, `trainer.tasks.export_for`); past that choice this module never
asks which task it holds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from safetensors.torch import save_file

from trainer.checkpoint import CheckpointStore
from trainer.inference import load_checkpoint_predictor
from trainer.tasks import export_for
from trainer.tasks.base import Predictor

FORMATS = ("bundle", "torchscript", "onnx")


class TaskExport(Protocol):
    """What one task's exports write and check (a module of trainer/tasks/ satisfies it)."""

    def examples(self, predictor: Predictor, images: np.ndarray | None) -> torch.Tensor:
        """The exported model's input for `images` (uint8 N x C x H x W) or seeded random ones."""

    def bundle_arrays(self, predictor: Predictor) -> dict[str, np.ndarray]:
        """Arrays the bundle holds beside the weights ({"mean.npy": ...}); often none."""

    def readme(self, predictor: Predictor, config: dict[str, Any], formats: tuple[str, ...], folder: str) -> str:
        """The bundle's README.txt: how to use the files this export holds, and no file it does not."""

    def torchscript(self, predictor: Predictor, x: torch.Tensor, path: Path) -> dict[str, Any]:
        """Write the TorchScript model to `path`; the report of its comparison with PyTorch on `x`."""

    def onnx(self, predictor: Predictor, x: torch.Tensor, path: Path, *, network: str) -> dict[str, Any]:
        """Write the ONNX model to `path`; ValueError naming `format` when `network` has none."""

    def format_notes(self, network: str, input_shape: tuple[int, int, int], parameters: int) -> dict[str, dict]:
        """{format: {"available": bool, "note": str}} said before anyone asks for an export."""


def write_bundle(
    predictor: Predictor,
    config: dict[str, Any],
    out: Path,
    *,
    readme: str,
    arrays: dict[str, np.ndarray],
) -> Path:
    """The one bundle writer: weights, labels, preprocessing, config (the server's folders by name
    only), the task's arrays and its README."""
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in predictor.model.state_dict().items()}
    save_file(state, out / "model.safetensors")
    (out / "labels.txt").write_text("".join(f"{label}\n" for label in predictor.labels), encoding="utf-8")
    (out / "preprocessing.json").write_text(json.dumps(predictor.preprocessing, indent=2), encoding="utf-8")
    (out / "config.json").write_text(json.dumps(shareable_config(config), indent=2), encoding="utf-8")
    for name, array in arrays.items():
        np.save(out / name, array)
    (out / "README.txt").write_text(readme, encoding="utf-8")
    return out


def shareable_config(config: dict[str, Any]) -> dict[str, Any]:
    """The server's folders stay on the server: the bundle keeps only the names of what it trained on."""
    config = {**config, "run_dir": Path(config.get("run_dir") or "").name}
    if isinstance(config.get("data"), dict) and config["data"].get("dataset"):
        config["data"] = {**config["data"], "dataset": Path(config["data"]["dataset"]).name}
    return config


def judged(report: dict[str, Any]) -> dict[str, Any]:
    """A comparison with PyTorch as it may be reported: `checked` only when it held something side
    by side (`compared`: the boxes, pixels or images a task's check compared). A detector that
    finds no box on any image of the check compares nothing, and passed "0 boxes on 8 images" as
    checked (issue 33): such a check says it could not check, and why (`not_checked`)."""
    if report.get("compared"):
        return {**report, "checked": True}
    return {**report, "checked": False, "not_checked": report.get("not_checked") or "there was nothing to compare"}


def export_torchscript(predictor: Predictor, path: Path, examples: np.ndarray | None = None) -> dict[str, Any]:
    """The predictor's TorchScript model at `path`, checked against PyTorch (on `examples` or random images)."""
    export = export_for(predictor.task)
    return judged(export.torchscript(predictor, export.examples(predictor, examples), path))


def export_onnx(
    predictor: Predictor, path: Path, examples: np.ndarray | None = None, *, network: str = ""
) -> dict[str, Any]:
    """The predictor's ONNX model at `path`, checked with onnxruntime against PyTorch."""
    export = export_for(predictor.task)
    return judged(export.onnx(predictor, export.examples(predictor, examples), path, network=network))


def format_notes(
    task: str, network: str, input_shape: tuple[int, int, int], parameters: int = 0
) -> dict[str, dict[str, Any]]:
    """What each export format holds for this task's network, in plain words, before anyone asks for
    it: {format: {"available": bool, "note": str}}. An unavailable format names the reason."""
    return export_for(task).format_notes(network, input_shape, parameters)


def resolve_checkpoint(run_dir: str | os.PathLike[str], which: str = "best") -> Path:
    store = CheckpointStore(run_dir)
    if which in ("best", "latest"):
        path = store.best() if which == "best" else store.latest()
        path = path or store.latest()
        if path is None:
            raise FileNotFoundError(f"{store.dir}: no checkpoint")
        return path
    return Path(which)


def export_run(
    checkpoint: str | os.PathLike[str],
    out: str | os.PathLike[str],
    formats: tuple[str, ...] = FORMATS,
    examples: np.ndarray | None = None,
) -> dict[str, Any]:
    """The bundle, plus TorchScript and ONNX when asked, in `out`, for a checkpoint of any task;
    each model checked against PyTorch on `examples` (uint8 N x C x H x W, the dataset's images)
    or on seeded random images."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"format: {unknown[0]!r} is not one of {', '.join(FORMATS)}")
    predictor = load_checkpoint_predictor(checkpoint)
    config = CheckpointStore.load(checkpoint)["config"]
    export = export_for(predictor.task)
    out = Path(out)
    readme = export.readme(predictor, config, formats, out.name)
    result: dict[str, Any] = {
        "task": predictor.task,
        "bundle": str(write_bundle(predictor, config, out, readme=readme, arrays=export.bundle_arrays(predictor))),
    }
    x = export.examples(predictor, examples)
    if "torchscript" in formats:
        result["torchscript"] = str(out / "model.torchscript.pt")
        result["torchscript_check"] = judged(export.torchscript(predictor, x, out / "model.torchscript.pt"))
    if "onnx" in formats:
        result["onnx"] = str(out / "model.onnx")
        result["onnx_check"] = judged(export.onnx(predictor, x, out / "model.onnx", network=config["network"]))
    return result
