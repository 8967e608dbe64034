"""The tasks: what differs between classification, detection and segmentation, one module each
(docs/design.md, "Tasks"). The engine (trainer/engine.py) keeps the loop, DDP, AMP,
accumulation, checkpoints, stop and resume, and asks the run's task for the rest: its networks,
the split's dataset and collate, the normalisation, the loss and the evaluator.
"""

from __future__ import annotations

from typing import Any

from trainer.config import ConfigError
from trainer.protocol import CLASSIFICATION, DETECTION, SEGMENTATION, TASKS
from trainer.tasks.base import Evaluator, Task, TaskError

__all__ = ["Evaluator", "Task", "TaskError", "export_for", "task_for"]


def task_for(name: str) -> Task:
    """The task named `name`; fails loudly, listing the tasks."""
    if name == CLASSIFICATION:
        from trainer.tasks.classification import ClassificationTask  # lazily: each task pulls its own libraries

        return ClassificationTask()
    if name == DETECTION:
        from trainer.tasks.detection import DetectionTask  # lazily: torchmetrics and faster-coco-eval

        return DetectionTask()
    if name == SEGMENTATION:
        from trainer.tasks.segmentation import SegmentationTask  # lazily: torchvision's segmentation models

        return SegmentationTask()
    raise ConfigError(f"task {name!r} is not one of {', '.join(TASKS)}", field="task")


def export_for(name: str) -> Any:
    """What the bundle, TorchScript and ONNX exports write and check for the task named `name`
    (trainer.export.TaskExport: the module trainer/tasks/<task>_export.py); fails loudly."""
    if name == CLASSIFICATION:
        from trainer.tasks import classification_export  # lazily: only an export needs onnx's tools

        return classification_export
    if name == DETECTION:
        from trainer.tasks import detection_export  # lazily: only an export needs onnx's tools

        return detection_export
    if name == SEGMENTATION:
        from trainer.tasks import segmentation_export  # lazily: only an export needs onnx's tools

        return segmentation_export
    raise ConfigError(f"task {name!r} is not one of {', '.join(TASKS)}", field="task")
