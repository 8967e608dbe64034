"""One benchmark cell in one process: build the network for a batch size, run warm-up steps (not
timed), then timed steps, and say what it cost; an out-of-memory is a result, not an error.
Every task's network is measured with its task's own step (trainer/tasks/: the loss a run of that
task minimises, the forward its inference calls), on random targets of the task or a dataset's.

`trainer.bench.run` calls `group_trials` in every process of a group (one process per GPU, or per
group of GPUs when the network is split) and combines the ranks' results into the table's cell.
"""

from __future__ import annotations

import contextlib
import gc
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from trainer.bench.config import BenchmarkConfig
from trainer.config import ConfigError, config_from_dict
from trainer.data import DevicePrefetcher, build_data, move
from trainer.dataset_folder import load_dataset_folder
from trainer.footprint import check_capacity, measure_step, parameter_bytes
from trainer.memory import is_oom
from trainer.networks import InputSpec
from trainer.parallel import split_model
from trainer.preflight import task_network_refusal
from trainer.protocol import task_of_network
from trainer.tasks import Task, task_for

_TRIED = re.compile(r"Tried to allocate ([\d.]+) (GiB|MiB|KiB)")
_UNIT = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10}


@dataclass
class Group:
    """Cells that share their processes: one network, precision, mode and GPU count."""

    network: str
    precision: str
    mode: str
    gpus: int

    def to_dict(self) -> dict[str, Any]:
        return {"network": self.network, "precision": self.precision, "mode": self.mode, "gpus": self.gpus}


@dataclass
class Built:
    task: Task  # the network's: its loss and forward are the step's
    model: nn.Module  # what a step calls (DDP when several processes train)
    plain: nn.Module
    stage_blocks: list[list[nn.Module]]
    optimizer: torch.optim.Optimizer | None
    scaler: torch.amp.GradScaler


def torch_device(name: str | int) -> torch.device:
    return torch.device("cpu") if name == "cpu" else torch.device("cuda", int(name))


def input_spec(cfg: BenchmarkConfig) -> InputSpec:
    if cfg.synthetic:
        return InputSpec(cfg.channels, cfg.image_size, cfg.image_size, cfg.num_classes)
    info = load_dataset_folder(cfg.data)
    return InputSpec(info.channels, info.image_height, info.image_width, info.num_classes)


def autocast_for(device: torch.device, precision: str) -> Callable[[], contextlib.AbstractContextManager]:
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    return lambda: torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def build(cfg: BenchmarkConfig, group: Group, spec: InputSpec, devices: list[torch.device], batch: int, world: int):
    torch.manual_seed(cfg.seed)
    task = task_for(task_of_network(group.network))
    model = task.build_model(group.network, spec)
    fmt = torch.channels_last if cfg.channels_last else torch.preserve_format
    blocks: list[list[nn.Module]] = []
    if len(devices) > 1:
        sample = torch.zeros(1, spec.channels, spec.height, spec.width)
        stages = split_model(model, devices, sample, batch=batch, memory_format=fmt)
        blocks = [[block.module for block in stage.blocks] for stage in stages]
    else:
        model.to(devices[0], memory_format=fmt)
    train = group.mode == "train"
    model.train(train)
    wrapped: nn.Module = model
    if train and world > 1:
        single = devices[0].type == "cuda" and len(devices) == 1
        wrapped = DistributedDataParallel(model, device_ids=[devices[0].index] if single else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=0.9) if train else None
    scaler = torch.amp.GradScaler(devices[0].type, enabled=group.precision == "fp16")
    return Built(task, wrapped, model, blocks, optimizer, scaler)


def synthetic_batch(task: Task, spec: InputSpec, batch: int, device: torch.device, channels_last: bool):
    """A random normalised batch and random targets of `task` (labels, boxes or masks), on the device."""
    # Made on the device: the largest-batch finder's probes would otherwise copy gigabytes.
    x = torch.randn(
        batch, spec.channels, spec.height, spec.width, generator=torch.Generator(device).manual_seed(0), device=device
    )
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    return x, move(task.synthetic_targets(spec, batch, torch.Generator().manual_seed(0)), device)


def synthetic_batches(task: Task, spec: InputSpec, batch: int, device: torch.device, channels_last: bool) -> Iterator:
    """One batch made on the device and fed again and again: the engine's ceiling, no input cost."""
    x, y = synthetic_batch(task, spec, batch, device, channels_last)
    while True:
        yield x, y, 0.0


def dataset_batches(cfg: BenchmarkConfig, group: Group, batch: int, rank: int, world: int, device) -> Iterator:
    """The real input pipeline (LMDB, decode, workers, prefetch to the device), epoch after epoch;
    each batch with the seconds the step waited for it."""
    train_cfg = config_from_dict(
        {
            "run_dir": cfg.run_dir,
            "network": group.network,
            "batch_size": batch * world,
            "devices": ["cpu"] * (world * cfg.model_parallel),
            "model_parallel": cfg.model_parallel,
            "channels_last": cfg.channels_last,
            "data": {"dataset": cfg.data, "num_workers": cfg.num_workers},
        },
        check_paths=False,
    )
    info = load_dataset_folder(cfg.data)
    refusal = task_network_refusal(group.network, info.task)  # the pre-flight's rule, for a folder changed since
    if refusal:
        raise ConfigError(refusal.message, field="networks")
    data = build_data(
        train_cfg, info, task=task_for(info.task), rank=rank, world=world, pin_memory=device.type == "cuda"
    )
    normalize = data.normalize.to(device)
    epoch = 0
    while True:
        data.train_sampler.set_epoch(epoch)
        start = time.perf_counter()
        for images, labels in DevicePrefetcher(data.train_loader, device):
            wait = time.perf_counter() - start
            yield normalize(images.to(device, non_blocking=True)), move(labels, device), wait
            start = time.perf_counter()
        epoch += 1


def step(built: Built, x: torch.Tensor, y, autocast) -> None:
    if built.optimizer is None:
        with torch.no_grad(), autocast():
            built.task.forward(built.model, x)
        return
    with autocast():
        loss, _parts = built.task.loss(built.model, x, y)
    built.scaler.scale(loss).backward()
    built.scaler.step(built.optimizer)
    built.scaler.update()
    built.optimizer.zero_grad(set_to_none=True)


def _sync(devices: list[torch.device]) -> None:
    for device in devices:
        if device.type == "cuda":
            torch.cuda.synchronize(device)


def _cuda_needed(devices: list[torch.device], exc: BaseException) -> int | None:
    """What a CUDA step that ran out needed, at least: its peak so far plus the failed request."""
    if devices[0].type != "cuda":
        return None
    match = _TRIED.search(str(exc))
    tried = int(float(match.group(1)) * _UNIT[match.group(2)]) if match else 0
    return max(torch.cuda.max_memory_allocated(d) for d in devices) + tried


def timed_trial(cfg: BenchmarkConfig, group: Group, batch: int, *, rank: int, world: int, devices) -> dict:
    """This process's share of one cell: images, seconds, data wait, memory; or the OOM."""
    spec = input_spec(cfg)
    autocast = autocast_for(devices[0], group.precision)
    for device in devices:
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
    built = build(cfg, group, spec, devices, batch, world)
    names = [str(d) for d in devices]
    need = None
    if devices[0].type == "cpu":  # no allocator to ask: measure the step (and enforce a capacity)
        need = measure_task_step(built, spec, batch, autocast, train=group.mode == "train", cfg=cfg)
        if world > 1 and group.mode == "train":
            need[0] += parameter_bytes(built.plain)  # DDP's gradient buckets
        check_capacity(need, cfg.memory_capacity_mb, batch=batch, devices=names)
    if cfg.synthetic:
        batches = synthetic_batches(built.task, spec, batch, devices[0], cfg.channels_last)
    else:
        batches = dataset_batches(cfg, group, batch, rank, world, devices[0])
    try:
        for _ in range(cfg.warmup_steps):
            x, y, _wait = next(batches)
            step(built, x, y, autocast)
        _sync(devices)
        wait, start = 0.0, time.perf_counter()
        for _ in range(cfg.steps):
            x, y, waited = next(batches)
            wait += waited
            step(built, x, y, autocast)
        _sync(devices)
        seconds = time.perf_counter() - start
    finally:
        batches.close()
    if devices[0].type == "cuda":
        need = [torch.cuda.max_memory_allocated(d) for d in devices]
    return {"ok": True, "images": batch * cfg.steps, "seconds": seconds, "wait": wait, "stage_memory": need}


def measure_task_step(built: Built, spec: InputSpec, batch: int, autocast, *, train: bool, cfg) -> list[int]:
    """Bytes one step of the built network needs at `batch` (trainer.footprint.measure_step),
    through its task's loss in training and its task's forward when serving."""
    x, y = synthetic_batch(built.task, spec, batch, torch.device("cpu"), cfg.channels_last)
    task = built.task

    def call(model: nn.Module, batch_x: torch.Tensor) -> object:
        return task.loss(model, batch_x, y)[0] if train else task.forward(model, batch_x)

    return measure_step(built.plain, x, autocast, train=train, stage_modules=built.stage_blocks, call=call)


def trial(cfg: BenchmarkConfig, group: Group, batch: int, *, rank: int, world: int, devices) -> dict:
    """`timed_trial` with its failures turned into results, and the memory given back after."""
    try:
        return timed_trial(cfg, group, batch, rank=rank, world=world, devices=devices)
    except Exception as exc:  # one cell's failure is recorded in its cell; the next cells run
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        if is_oom(exc):
            needed = _needed_from(exc) or _cuda_needed(devices, exc)
            return {"ok": False, "oom": True, "message": first, "needed": needed}
        return {"ok": False, "oom": False, "message": f"{type(exc).__name__}: {first}"}
    finally:
        gc.collect()
        if devices[0].type == "cuda":
            torch.cuda.empty_cache()


def _needed_from(exc: BaseException) -> int | None:
    match = re.search(r"needs ([\d,.]+) MiB", str(exc))
    return int(float(match.group(1).replace(",", "")) * 2**20) if match else None


def combine(cfg: BenchmarkConfig, group: Group, batch: int, shares: list[dict]) -> dict:
    """The cell from every process's share (images/s add up; the slowest process sets the step)."""
    cell: dict[str, Any] = {
        **group.to_dict(),
        "batch_size": batch,
        "processes": len(shares),
        "stages": cfg.model_parallel,
        "data": "synthetic" if cfg.synthetic else "dataset",
        "memory_capacity_bytes": cfg.memory_capacity_mb * 2**20 if cfg.memory_capacity_mb else None,
    }
    failed = [s for s in shares if not s["ok"]]
    if failed:
        worst = max(failed, key=lambda s: s.get("needed") or 0)
        status = "oom" if any(s.get("oom") for s in failed) else "error"
        return {**cell, "status": status, "message": worst["message"], "memory_needed_bytes": worst.get("needed")}
    total = sum(s["images"] / s["seconds"] for s in shares)
    stage_memory = [max(values) for values in zip(*(s["stage_memory"] for s in shares), strict=True)]
    return {
        **cell,
        "status": "ok",
        "images_per_sec": total,
        "images_per_sec_per_gpu": total / group.gpus,
        "step_time_s": max(s["seconds"] for s in shares) / cfg.steps,
        "data_wait_share": min(1.0, sum(s["wait"] / s["seconds"] for s in shares) / len(shares)),
        "peak_memory_bytes": max(stage_memory),
        "stage_memory_bytes": stage_memory if cfg.model_parallel > 1 else None,
    }


def group_trials(
    cfg: BenchmarkConfig, group: Group, *, rank: int, world: int, devices, emit: Callable[[dict], None]
) -> None:
    """Every batch size of `group` in this process; rank 0 emits each combined cell."""
    for batch in cfg.batch_sizes:
        share = trial(cfg, group, batch, rank=rank, world=world, devices=devices)
        shares = [share]
        if world > 1:
            shares = [None] * world
            dist.all_gather_object(shares, share)
        if rank == 0:
            emit(combine(cfg, group, batch, shares))
