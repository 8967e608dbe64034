"""The benchmark configuration: which cells to measure, loaded from JSON and validated once.

A benchmark is a grid of short trials ("cells"): for each network, precision and mode, every GPU
count against every per-GPU batch size. Standard library only: the workbench validates requests
with `validate_benchmark` before anything starts, in processes that never load torch.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.config import NETWORKS, PRECISIONS, ConfigError, parse_devices, shown
from trainer.preflight import task_network_refusal
from trainer.protocol import (
    DETECTION,
    SEGMENTATION,
    TASK_NETWORKS,
    TASK_TRAITS,
    layout_refusal,
    task_of_network,
)
from trainer.zoo import is_timm, side_problem

MODES = ("train", "forward")  # forward + backward + step, or forward only (serving)
SYNTHETIC = "synthetic"
MAX_CELLS = 512
MAX_GPUS = 64  # a benchmark's widest column
# Every built-in network of every task: each cell takes its task's step (trainer/tasks/, the
# loss and forward a run of that task uses) on random targets of that task, or on a dataset's.
BENCHMARK_NETWORKS = (
    *(name for name in NETWORKS if name != "custom"),
    *TASK_NETWORKS[DETECTION],
    *TASK_NETWORKS[SEGMENTATION],
)


@dataclass
class BenchmarkConfig:
    run_dir: str = ""
    networks: list[str] = field(default_factory=lambda: ["resnet50"])
    image_size: int = 224  # synthetic data: square images of this side
    channels: int = 3
    num_classes: int = 1000
    devices: list[str | int] = field(default_factory=lambda: ["cpu"])  # every device granted
    gpu_counts: list[int] = field(default_factory=lambda: [1])  # the table's columns
    batch_sizes: list[int] = field(default_factory=lambda: [32, 64])  # per GPU (per group when split)
    precisions: list[str] = field(default_factory=lambda: ["fp32"])
    modes: list[str] = field(default_factory=lambda: ["train"])
    data: str = SYNTHETIC  # "synthetic" or a dataset folder (the real input pipeline)
    num_workers: int = 2  # DataLoader workers per process, real data only
    model_parallel: int = 1  # stages per group: the network split over this many devices
    warmup_steps: int = 3  # not timed: cuDNN autotuning, allocator growth, first-touch
    steps: int = 10  # timed
    find_largest: bool = False  # also search the largest batch that fits, per GPU count
    find_limit: int = 4096
    # Simulated GPUs: the memory each one has. The trainer measures a step's footprint and fails
    # a cell that needs more through the same out-of-memory path as CUDA.
    memory_capacity_mb: int | None = None
    channels_last: bool = False
    seed: int = 0

    @property
    def synthetic(self) -> bool:
        return self.data == SYNTHETIC

    def processes(self, gpus: int) -> int:
        return gpus // self.model_parallel

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def parse_layout(value: str) -> tuple[int, int | None]:
    """`data` -> (1, None): every GPU its own process; `SxG` -> (S, G): the network split over S
    GPUs per group, G groups (data parallel over the groups), S x G GPUs in all."""
    text = (value or "data").strip().lower()
    if text in ("data", "dp", "data-parallel"):
        return 1, None
    match = re.fullmatch(r"(\d+)\s*x\s*(\d+)", text)
    if not match or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise ConfigError(f"{value!r} is not 'data' or stages x groups such as '2x2'", field="layout")
    return int(match.group(1)), int(match.group(2))


def _int_list(name: str, values: Any, *, low: int = 1, high: int = 1 << 20) -> list[int]:
    if not isinstance(values, list) or not values:
        raise ConfigError("expected a non-empty list of integers", field=name)
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"{shown(value)} must be an integer from {low} to {high}", field=name)
    return sorted(set(values))


def _names(name: str, values: Any, allowed: tuple[str, ...]) -> list[str]:
    if not isinstance(values, list) or not values:
        raise ConfigError(f"expected a non-empty list of {', '.join(allowed)}", field=name)
    for value in values:
        if value not in allowed:
            raise ConfigError(f"{value!r} is not one of {', '.join(allowed)}", field=name)
    return list(dict.fromkeys(values))


def _dataset_task(folder: str) -> str | None:
    """The task of a dataset folder, as the trainer reads it (a DIGITS folder is a classifier's);
    None when the folder cannot be read: loading it for the cells says why, by name."""
    from trainer.dataset_folder import load_dataset_folder  # reads LMDBs: not at the web process's import

    try:
        return load_dataset_folder(folder).task
    except (OSError, ValueError):  # DatasetFolderError, and an unreadable LMDB's DatumError, are ValueErrors
        return None


def _check_task_network(cfg: BenchmarkConfig, network: str) -> None:
    """A detection or segmentation network trains whole on each GPU (the engine's rule too) and
    takes images of at least its task's smallest side (TaskTraits.min_side)."""
    refusal = layout_refusal(network, cfg.model_parallel)  # the runs' rule
    if refusal:
        raise ConfigError(refusal, field="model_parallel")
    side = TASK_TRAITS[task_of_network(network)].min_side
    if side is not None and cfg.synthetic and cfg.image_size < side:
        raise ConfigError(f"{network} needs images of at least {side}x{side}: use {side} or more", field="image_size")


def validate_benchmark(cfg: BenchmarkConfig, *, check_paths: bool = True) -> BenchmarkConfig:
    """Checks every field (ConfigError names the first bad one); returns cfg."""
    cfg.networks = _names("networks", cfg.networks, BENCHMARK_NETWORKS)
    cfg.precisions = _names("precisions", cfg.precisions, PRECISIONS)
    cfg.modes = _names("modes", cfg.modes, MODES)
    cfg.gpu_counts = _int_list("gpu_counts", cfg.gpu_counts, high=MAX_GPUS)
    cfg.batch_sizes = _int_list("batch_sizes", cfg.batch_sizes, high=65536)
    for name, low, high in (
        ("image_size", 4, 4096),
        ("channels", 1, 4),
        ("num_classes", 2, 100000),
        ("num_workers", 0, 64),
        ("model_parallel", 1, 64),
        ("warmup_steps", 0, 1000),
        ("steps", 1, 10000),
        ("find_limit", 1, 1 << 20),
        ("seed", 0, 2**31),
    ):
        _int_list(name, [getattr(cfg, name)], low=low, high=high)
    for network in cfg.networks:
        _check_task_network(cfg, network)
    for network in cfg.networks if cfg.synthetic else []:
        # Said before anything is queued: a transformer's patch grid or a ConvNeXt's least side
        # would otherwise fail every cell once the benchmark held its GPUs.
        problem = is_timm(network) and side_problem(network, cfg.image_size)
        if problem:
            raise ConfigError(problem, field="image_size")
    if cfg.memory_capacity_mb is not None:
        _int_list("memory_capacity_mb", [cfg.memory_capacity_mb], high=1 << 24)
    cfg.devices = parse_devices(cfg.devices)
    if max(cfg.gpu_counts) > len(cfg.devices):
        raise ConfigError(
            f"{max(cfg.gpu_counts)} GPUs asked for, {len(cfg.devices)} device(s) granted", field="gpu_counts"
        )
    odd = [n for n in cfg.gpu_counts if n % cfg.model_parallel]
    if odd:
        raise ConfigError(
            f"{odd[0]} GPUs cannot form groups of {cfg.model_parallel} (the network split over "
            f"{cfg.model_parallel} GPUs)",
            field="gpu_counts",
        )
    if "fp16" in cfg.precisions and cfg.devices[0] == "cpu":
        raise ConfigError("'fp16' needs CUDA devices; on the CPU use 'bf16' or 'fp32'", field="precisions")
    cells = len(cfg.networks) * len(cfg.precisions) * len(cfg.modes) * len(cfg.gpu_counts) * len(cfg.batch_sizes)
    if cells > MAX_CELLS:
        raise ConfigError(f"{cells} cells; a benchmark measures at most {MAX_CELLS}", field="batch_sizes")
    if not cfg.run_dir:
        raise ConfigError("required (the folder for the benchmark's files)", field="run_dir")
    if check_paths and not cfg.synthetic and not Path(cfg.data).is_dir():
        raise ConfigError(f"dataset folder {Path(cfg.data).name!r} not found", field="data")
    dataset_task = _dataset_task(cfg.data) if check_paths and not cfg.synthetic else None
    for network in cfg.networks if dataset_task else []:
        refusal = task_network_refusal(network, dataset_task)  # the runs' pre-flight rule
        if refusal:
            raise ConfigError(refusal.message, field="networks")
    return cfg


def benchmark_from_dict(raw: dict[str, Any], *, check_paths: bool = True) -> BenchmarkConfig:
    if not isinstance(raw, dict):
        raise ConfigError("expected an object", field="config")
    known = {f.name for f in dataclasses.fields(BenchmarkConfig)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"unknown field (known: {', '.join(sorted(known))})", field=unknown[0])
    return validate_benchmark(BenchmarkConfig(**raw), check_paths=check_paths)


def load_benchmark(path: str | os.PathLike[str]) -> BenchmarkConfig:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {Path(path).name} not found") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON ({exc})", field="config") from None
    return benchmark_from_dict(raw)
