"""The pre-flight: every rule that judges a run's config against its dataset, before anything starts.

One home for the trainer and the workbench: `engine.prepare` asks it at launch, and the workbench
asks it at submit (the form, the API, the CLI, sweeps and searches: runs/network_fit.py; the
benchmarks through `task_network_refusal`), so a run that is queued never fails at launch on a rule
that could have been said, and both say it in the same words. A config here has passed
`trainer.config.validate` (each field in its range); these rules need the dataset's facts too.

Standard library only at import: web processes ask it without loading torch. The one rule that
builds a network (does a classifier take these images?) loads torch when it runs, and keeps its
answers (`input_refusal`), so a search checking 50 values of a learning rate builds its network once.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainer.config import TrainConfig, networks_of
from trainer.messages import ConfigError, shown
from trainer.protocol import CLASSIFICATION, TASK_TRAITS, best_metric_of, layout_refusal
from trainer.recipes import recipe_refusal


@dataclass(frozen=True)
class DatasetFacts:
    """What the rules know of a dataset: its task and, once it is built, its images' size and how
    many training images it has (0: not known yet; the rules that need them wait for the launch,
    where the trainer reads the folder)."""

    task: str = CLASSIFICATION
    channels: int = 3
    width: int = 0
    height: int = 0
    classes: int = 1
    train_images: int = 0

    @property
    def sized(self) -> bool:
        return self.width > 0 and self.height > 0


def facts_of(info: Any) -> DatasetFacts:
    """The facts of a dataset folder as the trainer reads it (a trainer.dataset_folder.DatasetInfo)."""
    train = info.splits.get("train")
    return DatasetFacts(
        task=info.task,
        channels=info.channels,
        width=info.image_width,
        height=info.image_height,
        classes=info.num_classes,
        train_images=train.count if train else 0,
    )


def input_shape(cfg: TrainConfig, facts: DatasetFacts) -> tuple[int, int, int]:
    """(channels, height, width) the network sees: the crop when there is one, else the images."""
    crop = cfg.data.crop_size
    return facts.channels, crop or facts.height, crop or facts.width


# ------------------------------------------------------------------------------------------
# The rules, in the order they are told. Each returns the ConfigError that names its field, or
# None; a rule whose facts are not known yet (a dataset still building) says nothing.
# ------------------------------------------------------------------------------------------


def crop_refusal(cfg: TrainConfig, facts: DatasetFacts) -> ConfigError | None:
    """A crop no larger than the images: the loader cannot cut 64x64 out of 32x32."""
    crop = cfg.data.crop_size
    if crop is None or not facts.sized or (crop <= facts.width and crop <= facts.height):
        return None
    message = f"{shown(crop)} is larger than the dataset images ({facts.width}x{facts.height})"
    return ConfigError(message, field="data.crop_size")


def task_network_refusal(network: str, task: str) -> ConfigError | None:
    """The network is one of the dataset's task: a classifier cannot read boxes, nor a detector classes."""
    allowed = networks_of(task)
    if network in allowed:
        return None
    return ConfigError(f"{network} is not a {task} network; choose one of {', '.join(allowed)}", field="network")


def _task_network(cfg: TrainConfig, facts: DatasetFacts) -> ConfigError | None:
    return task_network_refusal(cfg.network, facts.task)


def side_refusal(network: str, facts: DatasetFacts) -> ConfigError | None:
    """torchvision's detectors and segmentation networks need their task's smallest side
    (TaskTraits.min_side: their backbones' strides leave nothing of smaller images); a task without
    one (a classifier) has its sizes judged by input_refusal."""
    side = TASK_TRAITS[facts.task].min_side
    if side is None or not facts.sized or min(facts.width, facts.height) >= side:
        return None
    sides = f"{side}x{side}, dataset is {facts.width}x{facts.height}"
    return ConfigError(f"{network} needs images of at least {sides}", field="network")


def _side(cfg: TrainConfig, facts: DatasetFacts) -> ConfigError | None:
    """side_refusal on the images the network sees: at the crop size."""
    if crop_refusal(cfg, facts):
        return None
    _, height, width = input_shape(cfg, facts)
    return side_refusal(cfg.network, dataclasses.replace(facts, height=height, width=width))


def _takes_input(cfg: TrainConfig, facts: DatasetFacts) -> ConfigError | None:
    """A classifier (or custom network) can run on the images at the crop size: a task whose
    networks have no smallest side (TaskTraits.min_side) is held to its images by building one."""
    sized_by_task = TASK_TRAITS[facts.task].min_side is not None
    if sized_by_task or not facts.sized or crop_refusal(cfg, facts) or _task_network(cfg, facts):
        return None
    shape = (*input_shape(cfg, facts), max(1, facts.classes))
    key = layers_key(cfg.custom_layers or [])
    if key is None:
        return ConfigError(f"the layers are over {MAX_LAYERS_TEXT // 1024} KiB of JSON", field="custom_layers")
    refusal = input_refusal(cfg.network, shape, key)
    return ConfigError(refusal[1], field=refusal[0]) if refusal else None


def _recipe(cfg: TrainConfig, facts: DatasetFacts) -> ConfigError | None:
    """The recipe's augmentations apply to the images (trainer/recipes.py's rule)."""
    refusal = recipe_refusal(setting_of(cfg), channels=facts.channels, task=facts.task)
    return ConfigError(refusal[1], field=refusal[0]) if refusal else None


def _best_metric(cfg: TrainConfig, facts: DatasetFacts) -> ConfigError | None:
    """The best checkpoint is chosen by a metric the dataset's task reports."""
    try:
        best_metric_of(facts.task, cfg.best_metric)
    except ValueError as error:
        return ConfigError(str(error), field="best_metric")
    return None


def _layout(cfg: TrainConfig, facts: DatasetFacts) -> ConfigError | None:
    """Only a classifier can be split over devices (trainer/protocol.py's rule)."""
    refusal = layout_refusal(cfg.network, cfg.model_parallel)
    return ConfigError(refusal, field="model_parallel") if refusal else None


def batch_refusal(batch: int, train_images: int) -> ConfigError | None:
    """A batch no larger than the training images: an epoch must have at least one step. Also
    the new-run page's learning-rate preview's rule, for each batch of a sweep."""
    if not train_images or batch <= train_images:
        return None
    return ConfigError(f"{batch} is larger than the {train_images} training images", field="batch_size")


def _batch(cfg: TrainConfig, facts: DatasetFacts) -> ConfigError | None:
    return batch_refusal(cfg.batch_size, facts.train_images)


RULES: tuple[Callable[[TrainConfig, DatasetFacts], ConfigError | None], ...] = (
    crop_refusal,
    _task_network,
    _side,
    _takes_input,
    _recipe,
    _best_metric,
    _layout,
    _batch,
)


# The rules on the images alone (the new-run page's augmentation preview asks only these).
IMAGE_RULES = (crop_refusal, _recipe)


def preflight(cfg: TrainConfig, facts: DatasetFacts, *, rules: tuple = RULES) -> list[ConfigError]:
    """Every rule's refusal of `cfg` (validated: trainer.config.validate has judged its fields and
    its devices, cfg.devices) on a dataset of `facts`, in RULES' order; [] when the run can start."""
    return [error for rule in rules if (error := rule(cfg, facts)) is not None]


# ------------------------------------------------------------------------------------------
# Building a network to see whether it takes the images: kept per process, by what decides it.
# ------------------------------------------------------------------------------------------

# The answer depends only on the network, the input and a custom network's layers, never on the
# rest of the config, so a search checking every candidate value builds its network once, not
# once a value (1,024 builds, 56 s of one web thread before they were kept).
CHECKED_NETWORKS = 256


# The longest JSON text of a custom network's layers (256 layers of 512 characters each): a
# request body may carry megabytes there, and the text is the key of caches of 256 entries.
MAX_LAYERS_TEXT = 128 * 1024


def layers_key(layers: list) -> str | None:
    """A custom network's layers as a cache key (their JSON text); `[]` for any other network.
    None when the text is longer than MAX_LAYERS_TEXT: never a key (the pre-flight refuses it)."""
    text = json.dumps(layers, sort_keys=True, default=str)
    return text if len(text) <= MAX_LAYERS_TEXT else None


@functools.lru_cache(maxsize=CHECKED_NETWORKS)
def input_refusal(network: str, shape: tuple[int, int, int, int], layers: str) -> tuple[str, str] | None:
    """Why `network` cannot take images of `shape` (channels, height, width, classes) with a custom
    network's `layers` (layers_key), as (field, message); None when it can. Builds the network on
    the meta device once per distinct key and process: `input_refusal.cache_info().misses` counts them."""
    from trainer.custom_net import CustomNetError  # torch: loaded only where a network is checked
    from trainer.networks import InputSpec, NetworkError, check_input_size  # torch: as above

    try:
        check_input_size(network, InputSpec(*shape, json.loads(layers)))
    except CustomNetError as error:
        return "custom_layers", str(error)
    except NetworkError as error:
        return ("custom_layers" if network == "custom" else "network"), str(error)
    return None


def setting_of(cfg: TrainConfig) -> Callable[[str], Any]:
    """`path -> value` of a config ("data.color_jitter"), for the rules of trainer/recipes.py."""

    def setting(path: str) -> Any:
        owner, _, leaf = path.rpartition(".")
        return getattr({"": cfg, "data": cfg.data, "solver": cfg.solver}[owner], leaf)

    return setting
