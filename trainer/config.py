"""The run configuration: dataclasses loaded from JSON and validated once, up front.

Every error names the field and, where there is a closed set, the allowed values, so the web form
and the CLI can show it verbatim. The validated config is saved into every checkpoint.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.device_list import parse_devices  # its home; callers import it from here too
from trainer.finetune.config import check_finetune
from trainer.messages import ConfigError, nearest_multiple, plain_number, shown
from trainer.protocol import AVERAGE, BEST_WEIGHTS, METRIC_DIRECTION, TASK_NETWORKS
from trainer.recipes import AUTO_AUGMENTS, PRESETS, under_preset
from trainer.zoo import TIMM_NETWORKS

# Classification's networks: torchvision's and the workbench's own, then the zoo's (timm's,
# trainer/zoo.py), then "custom".
NETWORKS = (
    "lenet",
    "alexnet",
    "googlenet",
    "resnet18",
    "resnet34",
    "resnet50",
    "vgg16",
    "mobilenet_v3_small",
    "mobilenet_v3_large",
    "efficientnet_b0",
    "vit_b_16",
    *TIMM_NETWORKS,
    "custom",
)
OPTIMIZERS = ("sgd", "nesterov", "adam", "adamw", "lamb", "rmsprop", "adagrad", "adadelta")
LR_POLICIES = ("fixed", "step", "multistep", "exp", "inv", "poly", "sigmoid", "cosine", "onecycle")
PRECISIONS = ("fp32", "bf16", "fp16")
MEAN_MODES = ("image", "pixel", "none")
BEST_METRICS = ("top1", "val_loss")  # classification's, the form's choices
# What a config may name as its best metric: any task's (trainer/protocol.py); the engine checks
# it against the dataset's task, and a classification default on another task's dataset means
# that task's first metric.
ANY_METRIC = tuple(METRIC_DIRECTION)
# Every network a config may name: classification's above, then the other tasks'.
ALL_NETWORKS = NETWORKS + tuple(name for names in TASK_NETWORKS.values() for name in names)


def networks_of(task: str) -> tuple[str, ...]:
    """The networks a dataset of `task` trains (protocol.TASKS): one list for the form, the
    validators and the trainer's task layer."""
    return TASK_NETWORKS.get(task, NETWORKS)


@dataclass
class DataConfig:
    dataset: str = ""  # a dataset folder (see docs/formats.md)
    crop_size: int | None = None  # random crop for training, centre crop for validation
    random_flip: bool = False  # horizontal flips during training
    vertical_flip: bool = False
    mean_subtraction: str = "image"  # image | pixel | none
    num_workers: int = 2  # DataLoader worker processes per training process
    prefetch_factor: int = 4  # batches each worker keeps ready
    # Pretrained weights' own mean and std (per channel, 0..1 pixels): replace mean_subtraction.
    norm_mean: list[float] | None = None
    norm_std: list[float] | None = None
    # Train-time recipe augmentations (trainer/augment.py, on the device; recipes.WHERE says where
    # each runs). A random resized crop replaces the loader's random crop, at crop_size (or the
    # images' size), over this share of the image's area and range of aspect ratios.
    random_resized_crop: bool = False
    rrc_scale: list[float] = field(default_factory=lambda: [0.08, 1.0])
    rrc_ratio: list[float] = field(default_factory=lambda: [0.75, 1.3333])
    auto_augment: str = "none"  # recipes.AUTO_AUGMENTS
    color_jitter: float = 0.0  # brightness, contrast and saturation strength (0: off); colour images
    random_erasing: float = 0.0  # probability per image
    mixup_alpha: float = 0.0  # 0: off; with cutmix too, each batch takes one of the two
    cutmix_alpha: float = 0.0


@dataclass
class SolverConfig:
    optimizer: str = "sgd"
    base_lr: float = 0.01
    momentum: float = 0.9  # sgd/nesterov/rmsprop
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)  # adam/adamw
    lr_policy: str = "fixed"
    gamma: float = 0.1  # step, multistep, exp, inv, sigmoid
    power: float = 1.0  # inv, poly
    step_size: float = 33.0  # step, sigmoid: percent of the run (DIGITS convention)
    step_values: list[float] = field(default_factory=lambda: [50.0, 75.0])  # multistep, percent
    min_lr: float = 0.0  # cosine floor
    onecycle_pct_start: float = 0.3
    onecycle_div_factor: float = 25.0
    onecycle_final_div_factor: float = 1e4
    warmup_percent: float = 0.0  # linear warmup over this share of the run (percent)
    grad_clip_norm: float | None = None
    label_smoothing: float = 0.0
    # An exponential moving average of the weights (0: off), validated beside the raw weights;
    # the checkpoints' (and so the exports') model is the average when on.
    ema_decay: float = 0.0


@dataclass
class TrainConfig:
    run_dir: str = ""
    data: DataConfig = field(default_factory=DataConfig)
    network: str = "lenet"
    custom_layers: list[dict[str, Any]] | None = None  # network == "custom"
    pretrained: str | None = None  # a state_dict file for fine-tuning
    preset: str | None = None  # recipes.PRESETS: fills the fields a config leaves out (config_from_dict)
    # Fine-tuning the backbone (what `pretrained` gave): trainer/finetune/recipe.py, docs/formats.md.
    freeze_backbone_epochs: float = 0.0
    backbone_lr_mult: float = 1.0
    freeze_bn: bool = False
    solver: SolverConfig = field(default_factory=SolverConfig)
    epochs: float = 10.0
    batch_size: int = 64  # global: divided over the processes
    grad_accum: int = 1  # micro-batches per optimizer step
    devices: list[str | int] = field(default_factory=lambda: ["cpu"])
    # Devices per process: the network is split into this many stages, one per device, and data
    # parallelism runs over the groups (devices [0, 1, 2, 3] with 2: two processes of two GPUs).
    model_parallel: int = 1
    # Nodes the run spans (a Slurm job): `devices` are each node's, the processes of all nodes
    # form one data-parallel group (trainer/cluster.py says which node this process is on).
    nodes: int = 1
    precision: str = "fp32"
    channels_last: bool = False
    heldout_predictions: bool = False  # after training: the validation images' probabilities (trainer/heldout.py)
    compile: bool = False
    seed: int = 0
    val_interval: float = 1.0  # epochs between validations (0 = only at the end)
    snapshot_interval: float = 1.0  # epochs between checkpoints (0 = only at the end)
    keep_last: int = 3  # checkpoints kept besides the best
    best_metric: str = "top1"
    # With a weights' average: "raw" or "ema" forces the weights every checkpoint holds; None
    # takes the better of the two at each validation (protocol.checkpoint_weights).
    best_weights: str | None = None
    # Early stopping: end the run when best_metric has not improved by more than the delta for
    # this many validations in a row (0: off); the best checkpoint is kept as always.
    early_stopping_patience: int = 0
    early_stopping_min_delta: float = 0.0
    metrics_interval: int = 10  # steps between metrics events
    stop_check_interval: int = 10  # steps between multi-process "should we stop?" agreements
    dist_timeout_s: float = 300.0  # a collective that waits longer than this fails the run

    # ---------------------------------------------------------------- derived values
    @property
    def local_processes(self) -> int:
        """Processes on each node: one per group of `model_parallel` devices."""
        return len(self.devices) // self.model_parallel

    @property
    def world_size(self) -> int:
        """Processes (data-parallel ranks) over all nodes."""
        return self.nodes * self.local_processes

    def rank_devices(self, rank: int) -> list[str | int]:
        """The devices of process `rank`, one per stage of the network (a group never spans nodes)."""
        local = rank % self.local_processes
        return self.devices[local * self.model_parallel : (local + 1) * self.model_parallel]

    @property
    def per_process_batch(self) -> int:
        return self.batch_size // self.world_size

    @property
    def micro_batch(self) -> int:
        return self.per_process_batch // self.grad_accum

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: str | os.PathLike[str]) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2), encoding="utf-8")


# ------------------------------------------------------------------------------------------
# Defaults: the dataclasses above are their one home. The web form shows them as its initial
# values; the API, the CLI and sweeps leave unsent fields to them; a run stores what it trains
# with, sent or defaulted (`settings_of`), so a run reads the same whichever way it was made.
# ------------------------------------------------------------------------------------------

# What the launcher fills in for each attempt, not a setting of the run: its folder, its devices
# and nodes, the network and the dataset (the workbench keeps these as columns of the run).
LAUNCH_FIELDS = ("run_dir", "devices", "nodes", "network", "data.dataset")


def default_of(path: str) -> Any:
    """The default of the field `path` ("epochs", "solver.lr_policy", "data.num_workers")."""
    owner, _, leaf = path.rpartition(".")
    config = TrainConfig()
    return copy.deepcopy(getattr({"": config, "solver": config.solver, "data": config.data}[owner], leaf))


def settings_of(cfg: TrainConfig) -> dict[str, Any]:
    """Every setting `cfg` trains with, as JSON, without LAUNCH_FIELDS (and `pretrained` only when
    there are weights): the same dict for the same run, whether its fields were sent or defaulted."""
    settings = json.loads(json.dumps(cfg.to_dict()))
    for path in LAUNCH_FIELDS:
        owner, _, leaf = path.rpartition(".")
        (settings[owner] if owner else settings).pop(leaf, None)
    if settings.get("pretrained") is None:
        settings.pop("pretrained", None)
    if settings.get("preset") is None:
        settings.pop("preset", None)
    return settings


# ------------------------------------------------------------------------------------------
# Short names: the settings a request may name without their dotted path. One table for every
# door that takes them (the API's top-level fields, `manage.py train`'s options, a sweep's grid,
# a search's space, the new-run form's fields): each reads its names and their paths here.
# ------------------------------------------------------------------------------------------

SHORT_FIELDS: dict[str, str] = {
    "lr": "solver.base_lr",
    "solver": "solver.optimizer",  # the API's `solver` and `manage.py train --solver` (README)
    "momentum": "solver.momentum",
    "weight_decay": "solver.weight_decay",
    "lr_policy": "solver.lr_policy",
    "epochs": "epochs",
    "batch_size": "batch_size",
    "preset": "preset",
}
# Another name for a short field, kept because a released door took it: a search's space named
# the optimizer `optimizer` (POST /api/searches/ and `manage.py search --param`, issue 24).
SHORT_ALIASES = {"optimizer": "solver"}


def short_path(name: str) -> str | None:
    """The dotted path of a short name or alias ("lr" -> "solver.base_lr"); None for any other."""
    return SHORT_FIELDS.get(SHORT_ALIASES.get(name, name))


def with_setting(config: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of the config `config` (as sent, nested) with `value` at the dotted `path`; the
    objects on the way are copied too, so the caller's config is left as it was."""
    head, _, rest = path.partition(".")
    if not rest:
        return {**config, head: value}
    inner = config.get(head)
    return {**config, head: with_setting(inner if isinstance(inner, dict) else {}, rest, value)}


# ------------------------------------------------------------------------------------------
# The ranges of the numbers: one table for every entry point (the trainer's own command line, the
# web form, the API, sweeps, the CLI). Each bound is one a run can train with: a value inside
# never fails at launch (no float -> int overflow in the step counts, no timedelta overflow, no
# lr that the schedule's arithmetic cannot hold), so the web side refuses what the trainer would.
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Range:
    low: float
    high: float
    integer: bool = False
    above_low: bool = False  # low itself is refused (a positive number)

    def text(self) -> str:
        """How a refusal states the range: "a positive number up to 10", "between 0 and 100"."""
        high = plain_number(self.high)
        if self.integer and self.low in (0, 1) and not self.above_low:
            return f"a {'non-negative' if self.low == 0 else 'positive'} integer up to {high}"
        if self.above_low and self.low == 0:
            return f"a positive {'integer' if self.integer else 'number'} up to {high}"
        return f"{'a whole number ' if self.integer else ''}between {plain_number(self.low)} and {high}"


MAX_EPOCHS = 100_000
MAX_SEED = 2**31 - 1
RANGES: dict[str, Range] = {
    "epochs": Range(0, MAX_EPOCHS, above_low=True),
    "batch_size": Range(1, 1 << 20, integer=True),
    "grad_accum": Range(1, 1024, integer=True),
    "seed": Range(0, MAX_SEED, integer=True),
    "val_interval": Range(0, MAX_EPOCHS),
    "snapshot_interval": Range(0, MAX_EPOCHS),
    "keep_last": Range(1, 1000, integer=True),
    "early_stopping_patience": Range(0, 100_000, integer=True),
    "early_stopping_min_delta": Range(0, 1e6),
    "metrics_interval": Range(1, 1_000_000, integer=True),
    "stop_check_interval": Range(1, 1_000_000, integer=True),
    "dist_timeout_s": Range(0, 7 * 24 * 3600, above_low=True),  # a week: datetime.timedelta holds it
    "model_parallel": Range(1, 64, integer=True),
    "freeze_backbone_epochs": Range(0, MAX_EPOCHS),
    "backbone_lr_mult": Range(0, 1),
    "nodes": Range(1, 64, integer=True),
    "solver.base_lr": Range(0, 10, above_low=True),
    "solver.momentum": Range(0, 1),
    "solver.weight_decay": Range(0, 1),
    "solver.gamma": Range(0, 1000),
    "solver.power": Range(0, 100),
    "solver.step_size": Range(0, 100),  # percent of the run
    "solver.min_lr": Range(0, 10),
    "solver.warmup_percent": Range(0, 100),
    "solver.onecycle_pct_start": Range(0, 1),
    "solver.onecycle_div_factor": Range(1, 1e6),
    "solver.onecycle_final_div_factor": Range(1, 1e9),
    "solver.grad_clip_norm": Range(0, 1e6, above_low=True),
    "data.num_workers": Range(0, 64, integer=True),
    "data.prefetch_factor": Range(1, 64, integer=True),
    "data.crop_size": Range(1, 16384, integer=True),
    "data.color_jitter": Range(0, 1),
    "data.random_erasing": Range(0, 1),
    "data.mixup_alpha": Range(0, 10),
    "data.cutmix_alpha": Range(0, 10),
    "solver.label_smoothing": Range(0, 0.5),
    "solver.ema_decay": Range(0, 0.999999),
}
# Policies whose gamma multiplies the rate once per step or per stage: above 1 it grows without
# bound (gamma ** step overflows a float within a few thousand steps).
DECAY_POLICIES = ("step", "multistep", "exp")
MAX_LIST = 100  # step_values, betas: short lists; longer ones are refused before they are read


def check_number(name: str, value: Any, *, optional: bool = False) -> None:
    """RANGES[name] applied: JSON booleans are not numbers, integers are compared as integers
    (math.isfinite on a 400-digit int raises OverflowError), nothing non-finite passes."""
    if value is None and optional:
        return
    bounds = RANGES[name]
    number = isinstance(value, int) if bounds.integer else isinstance(value, int | float)
    if isinstance(value, bool) or not number or (isinstance(value, float) and not math.isfinite(value)):
        raise ConfigError(f"{shown(value)} must be {bounds.text()}", field=name)
    if value < bounds.low or (bounds.above_low and value == bounds.low) or value > bounds.high:
        raise ConfigError(f"{shown(value)} must be {bounds.text()}", field=name)


# ------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------


def _one_of(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{value!r} is not one of {', '.join(allowed)}", field=name)


def _build(cls: type, raw: Any, prefix: str) -> Any:
    if not isinstance(raw, dict):
        raise ConfigError(f"expected an object, got {type(raw).__name__}", field=prefix.rstrip(".") or "config")
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ConfigError(f"unknown field (known: {', '.join(sorted(known))})", field=f"{prefix}{unknown[0]}")
    kwargs = {}
    for name, value in raw.items():
        sub = {"data": DataConfig, "solver": SolverConfig}.get(name) if cls is TrainConfig else None
        kwargs[name] = _build(sub, value, f"{prefix}{name}.") if sub else value
    return cls(**kwargs)


def validate(cfg: TrainConfig, *, check_paths: bool = True) -> TrainConfig:
    """Check every field; raises ConfigError naming the first bad one. Returns cfg."""
    # Paths may arrive as pathlib objects from Python callers; the config must stay JSON.
    for owner, name in ((cfg, "run_dir"), (cfg.data, "dataset"), (cfg, "pretrained")):
        value = getattr(owner, name)
        if isinstance(value, os.PathLike):
            setattr(owner, name, os.fspath(value))
    if cfg.pretrained is not None and (not isinstance(cfg.pretrained, str) or not cfg.pretrained):
        raise ConfigError("expected the path of a state_dict file, or null", field="pretrained")
    cfg.devices = parse_devices(cfg.devices)
    _one_of("network", cfg.network, ALL_NETWORKS)
    _one_of("precision", cfg.precision, PRECISIONS)
    _one_of("best_metric", cfg.best_metric, ANY_METRIC)
    _one_of("solver.optimizer", cfg.solver.optimizer, OPTIMIZERS)
    _one_of("solver.lr_policy", cfg.solver.lr_policy, LR_POLICIES)
    _one_of("data.mean_subtraction", cfg.data.mean_subtraction, MEAN_MODES)
    _one_of("data.auto_augment", cfg.data.auto_augment, AUTO_AUGMENTS)
    for name, allowed in (("preset", tuple(PRESETS)), ("best_weights", BEST_WEIGHTS)):
        if getattr(cfg, name) is not None:
            _one_of(name, getattr(cfg, name), allowed)
    if cfg.best_weights == AVERAGE and not cfg.solver.ema_decay:
        raise ConfigError("'ema' needs a weights' average: set solver.ema_decay above 0", field="best_weights")
    for name, low, high in (("rrc_scale", 0.0, 1.0), ("rrc_ratio", 0.01, 100.0)):
        pair = getattr(cfg.data, name)
        if (
            not isinstance(pair, list | tuple)
            or len(pair) != 2
            or not all(not isinstance(v, bool) and isinstance(v, int | float) and low < v <= high for v in pair)
            or pair[0] > pair[1]
        ):
            raise ConfigError(
                f"{shown(pair)} must be two increasing numbers above {plain_number(low)}, at most {plain_number(high)}",
                field=f"data.{name}",
            )
        setattr(cfg.data, name, [float(pair[0]), float(pair[1])])
    if not isinstance(cfg.data.random_resized_crop, bool):
        raise ConfigError("must be true or false", field="data.random_resized_crop")

    for name in RANGES:
        owner, _, leaf = name.rpartition(".")
        value = getattr({"": cfg, "solver": cfg.solver, "data": cfg.data}[owner], leaf)
        check_number(name, value, optional=name in ("solver.grad_clip_norm", "data.crop_size"))
    if cfg.solver.lr_policy in DECAY_POLICIES and cfg.solver.gamma > 1:
        raise ConfigError(
            f"{shown(cfg.solver.gamma)} is above 1: with policy {cfg.solver.lr_policy!r} gamma is the decay "
            "factor (the rate is multiplied by it at each step), at most 1",
            field="solver.gamma",
        )
    steps = cfg.solver.step_values
    if (
        not isinstance(steps, list)
        or len(steps) > MAX_LIST
        or any(isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 100 for v in steps)
    ):
        raise ConfigError(
            f"must be a list of at most {MAX_LIST} percents between 0 and 100", field="solver.step_values"
        )
    cfg.solver.step_values = sorted(float(v) for v in steps)
    betas = cfg.solver.betas
    if (
        not isinstance(betas, list | tuple)
        or len(betas) != 2
        or not all(not isinstance(b, bool) and isinstance(b, int | float) and 0 <= b < 1 for b in betas)
    ):
        raise ConfigError(f"{shown(betas)} must be two numbers in [0, 1)", field="solver.betas")
    cfg.solver.betas = (float(betas[0]), float(betas[1]))

    if len(cfg.devices) % cfg.model_parallel:
        raise ConfigError(
            f"{len(cfg.devices)} devices cannot form groups of {cfg.model_parallel} "
            f"(devices {cfg.devices}); use a count of devices that {cfg.model_parallel} divides",
            field="model_parallel",
        )
    if cfg.early_stopping_patience and not cfg.val_interval:
        raise ConfigError(
            "needs validations during the run: set val_interval above 0 (epochs between validations)",
            field="early_stopping_patience",
        )
    if cfg.model_parallel > 1 and cfg.compile:
        raise ConfigError(
            "not available with model_parallel > 1 (the stages move tensors between devices)", field="compile"
        )
    world = cfg.world_size
    if cfg.batch_size % world:
        raise ConfigError(
            f"{cfg.batch_size} is not divisible by the {world} processes"
            + (f" ({cfg.nodes} nodes x {cfg.local_processes})" if cfg.nodes > 1 else "")
            + f"; the batch is split evenly over them: try {nearest_multiple(cfg.batch_size, world)}",
            field="batch_size",
        )
    if cfg.per_process_batch % cfg.grad_accum:
        raise ConfigError(
            f"per-process batch {cfg.per_process_batch} is not divisible by grad_accum {cfg.grad_accum}",
            field="grad_accum",
        )
    on_cpu = cfg.devices[0] == "cpu"
    if cfg.precision == "fp16" and on_cpu:
        raise ConfigError("'fp16' needs CUDA devices; on the CPU use 'bf16' or 'fp32'", field="precision")
    if cfg.network == "custom" and not cfg.custom_layers:
        raise ConfigError("network 'custom' needs a non-empty list of layers", field="custom_layers")
    if cfg.network != "custom" and cfg.custom_layers:
        raise ConfigError(f"only used with network 'custom', not {cfg.network!r}", field="custom_layers")
    for flag in ("compile", "channels_last", "heldout_predictions"):
        if not isinstance(getattr(cfg, flag), bool):
            raise ConfigError("must be true or false", field=flag)
    check_finetune(cfg)
    if not cfg.run_dir:
        raise ConfigError("required (the folder for checkpoints and events)", field="run_dir")
    if check_paths:
        if not cfg.data.dataset or not Path(cfg.data.dataset).is_dir():
            raise ConfigError(f"folder {cfg.data.dataset!r} not found", field="data.dataset")
        if cfg.pretrained and not Path(cfg.pretrained).is_file():
            # The file's name only: the folder it lives in is the server's business.
            raise ConfigError(f"file {Path(cfg.pretrained).name!r} not found", field="pretrained")
        if not on_cpu:
            # torch only here: configs are validated in web processes, which never load it otherwise
            import torch  # torch: loaded only where this runs

            count = torch.cuda.device_count()
            missing = [d for d in cfg.devices if d >= count]
            if missing:
                raise ConfigError(f"CUDA device(s) {missing} not present (this machine has {count})", field="devices")
    return cfg


def config_from_dict(raw: dict[str, Any], *, check_paths: bool = True) -> TrainConfig:
    # A preset fills what the config leaves out; what it sends wins (a sweep may vary the preset).
    cfg = _build(TrainConfig, under_preset(raw) if isinstance(raw, dict) else raw, "")
    return validate(cfg, check_paths=check_paths)


def load_config(path: str | os.PathLike[str], *, check_paths: bool = True) -> TrainConfig:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} not found") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    return config_from_dict(raw, check_paths=check_paths)
