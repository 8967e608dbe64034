"""What the engine asks of a task, and the pieces the tasks share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from trainer import protocol
from trainer.config import ConfigError, TrainConfig
from trainer.dataset_folder import DatasetInfo
from trainer.networks import InputSpec
from trainer.protocol import TaskTraits


class TaskError(ConfigError):
    """The run asks something of its task that the task cannot do (a network of another task)."""


class Evaluator(Protocol):
    """Validation over one split, shards reduced over the ranks at `compute`."""

    # Plain words about what the numbers mean, for the run's log ("no box scored above 0.05").
    notes: list[str]

    def update(self, model: nn.Module, x: torch.Tensor, targets: Any) -> None: ...

    def compute(self, *, world: int) -> dict[str, float]: ...


class Predictor(Protocol):
    """What inference and the exports hold of a trained model, whatever its task; each task gives
    its own (`trainer.tasks.task_for(name).predictor(state)`)."""

    task: str  # the name of the task that gives it: trainer.tasks.task_for(task)
    model: nn.Module
    labels: list[str]
    preprocessing: dict[str, Any]
    device: torch.device


class Task(Protocol):
    name: str
    networks: tuple[str, ...]
    metrics: tuple[str, ...]  # trainer.protocol.TASK_METRICS[name]; the first is the default best
    # trainer.protocol.TASK_TRAITS[name]: what the rules without torch know of it (its smallest
    # image side, whether the recipe's augmentations apply, whether its splits have targets).
    traits: TaskTraits
    # The DataLoader's collate (None: the default stacking of (image, label) pairs).
    collate: Callable[[list], Any] | None

    def build_model(self, name: str, spec: InputSpec) -> nn.Module: ...

    def dataset(self, info: DatasetInfo, split: str, *, cfg: TrainConfig, train: bool) -> Dataset:
        """Items (uint8 C x H x W image tensor, target); train items are (index, seed) addressed."""

    def normalize(self, info: DatasetInfo, cfg: TrainConfig) -> Callable[[torch.Tensor], torch.Tensor]:
        """uint8 batch on the device -> the network's float input (see trainer.data.Normalize)."""

    def to_device(self, targets: Any, device: torch.device) -> Any: ...

    def loss(self, model: nn.Module, x: torch.Tensor, targets: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The loss to minimise and its named parts (detached), in the model's train mode."""

    def evaluator(self, info: DatasetInfo, device: torch.device) -> Evaluator: ...

    def forward(self, model: nn.Module, x: torch.Tensor) -> Any:
        """The model's answer for a normalised batch in eval mode (benchmark mode's serving step)."""

    def synthetic_targets(self, spec: InputSpec, batch: int, generator: torch.Generator) -> Any:
        """Random targets of this task for `batch` images of `spec` (benchmark mode's data)."""

    def predictor(self, state: dict[str, Any], device: str | torch.device = "cpu") -> Predictor:
        """What inference runs for a checkpoint's state (a Classifier, Detector or Segmenter, each
        beside its task): one image or a batch, with the training preprocessing."""


def best_metric_for(task: Task, requested: str) -> str:
    """The metric the best checkpoint and early stopping watch: the requested one when it is the
    task's; the classification default on another task's dataset means that task's first."""
    try:
        return protocol.best_metric_of(task.name, requested)
    except ValueError as error:
        raise TaskError(str(error), field="best_metric") from None


def as_rgb(x: torch.Tensor) -> torch.Tensor:
    """Grey batches for torchvision's detection and segmentation networks, which are RGB."""
    return x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x


def seeded(item: int | tuple[int, int]) -> tuple[int, int | None]:
    """(index, seed) of a train item, (index, None) of an evaluation one (trainer.data.ShardedSampler)."""
    return item if isinstance(item, tuple) else (item, None)


def with_seed(seed: int | None, apply: Callable[[], Any]) -> Any:
    """`apply()` with torch's RNG seeded by `seed` and restored after: a sample's augmentation
    depends only on its seed, not on which worker or process draws it (resume sees the same)."""
    if seed is None:
        return apply()
    with torch.random.fork_rng(devices=[]):
        # The CPU generator only, which is all fork_rng(devices=[]) restores and all transforms
        # v2 draw from: torch.manual_seed would also seed CUDA (lazily where it is not up, as in
        # loader workers, formatting a stack trace each time): a quarter to a third of a sample's time.
        torch.default_generator.manual_seed(seed % (1 << 63))
        return apply()


def image_tensor(chw: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(chw))


def model_from_state(task: Task, state: dict[str, Any]) -> nn.Module:
    """A task's network with a checkpoint's weights loaded (its shape from the state's preprocessing)."""
    c, h, w = state["preprocessing"]["input_shape"]
    spec = InputSpec(c, h, w, len(state["labels"]), state["config"].get("custom_layers") or [])
    model = task.build_model(state["config"]["network"], spec)
    model.load_state_dict(state["model"])
    return model
