"""A whole benchmark: every group of cells (in-process for one process, else one process per GPU
or per group of GPUs, gloo on the CPU and NCCL on CUDA), then the largest batch that fits.

Events (JSON lines, trainer/protocol.py): `status` starting/running, one `cell` per measured
cell, `largest_batch` per GPU count when asked, `progress` after each, and the final `status`.
A stop signal ends the benchmark after the running group (its processes are ended), keeping
every cell measured so far.
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import logging
import multiprocessing as mp
import queue
import signal
import time
from typing import Any

import torch
import torch.distributed as dist

from trainer.batch_size import search_batch_size, step_fits
from trainer.bench.config import BenchmarkConfig, benchmark_from_dict
from trainer.bench.trial import (
    Group,
    autocast_for,
    build,
    group_trials,
    input_spec,
    measure_task_step,
    step,
    synthetic_batch,
    torch_device,
)
from trainer.distributed import free_port
from trainer.events import Events
from trainer.footprint import MiB, parameter_bytes
from trainer.memory import OutOfMemory, is_oom
from trainer.protocol import CELL, EXIT_FAILED, LARGEST_BATCH, RUNNING, Outcome
from trainer.stopping import StopFlag

log = logging.getLogger("trainer")


def plan(cfg: BenchmarkConfig) -> list[Group]:
    return [
        Group(network, precision, mode, gpus)
        for network in cfg.networks
        for precision in cfg.precisions
        for mode in cfg.modes
        for gpus in cfg.gpu_counts
    ]


def rank_devices(cfg: BenchmarkConfig, rank: int) -> list[torch.device]:
    names = cfg.devices[rank * cfg.model_parallel : (rank + 1) * cfg.model_parallel]
    return [torch_device(name) for name in names]


def _rank_main(rank: int, world: int, port: int, raw: dict, group: dict, q: Any) -> None:
    # SIGTERM when the benchmark's process dies, so a rank never outlives it (PR_SET_PDEATHSIG = 1)
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    cfg = benchmark_from_dict(raw, check_paths=False)
    devices = rank_devices(cfg, rank)
    on_cuda = devices[0].type == "cuda"
    if on_cuda:
        torch.cuda.set_device(devices[0])
    dist.init_process_group(
        "nccl" if on_cuda else "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        group_trials(cfg, Group(**group), rank=rank, world=world, devices=devices, emit=lambda c: q.put(("cell", c)))
    finally:
        q.put(("done", rank))
        dist.destroy_process_group()


def run_group(cfg: BenchmarkConfig, group: Group, *, emit, stop: StopFlag) -> bool:
    """The group's cells; False when stopped or its processes died before they were all measured."""
    world = cfg.processes(group.gpus)
    if world == 1:
        group_trials(cfg, group, rank=0, world=1, devices=rank_devices(cfg, 0), emit=emit)
        return True
    ctx = mp.get_context("spawn")  # fork after torch/CUDA initialisation is unsafe
    q = ctx.Queue()
    port = free_port()
    procs = [
        ctx.Process(target=_rank_main, args=(r, world, port, cfg.to_dict(), group.to_dict(), q)) for r in range(world)
    ]
    for p in procs:
        p.start()
    measured, finished = 0, set()
    while len(finished) < world:
        if stop.requested or any(p.exitcode not in (None, 0) for p in procs):
            break
        try:
            item = q.get(timeout=0.2)
        except queue.Empty:
            continue
        if item[0] == "cell":
            measured += 1
            emit(item[1])
        else:
            finished.add(item[1])
    for p in procs:
        p.join(timeout=5 if len(finished) == world else 0.5)
        if p.is_alive():
            p.kill()
            p.join()
    if measured < len(cfg.batch_sizes) and not stop.requested:
        codes = [p.exitcode for p in procs]
        for batch in cfg.batch_sizes[measured:]:
            emit({**group.to_dict(), "batch_size": batch, "status": "error",
                  "message": f"the group's processes ended early (exit codes {codes})"})  # fmt: skip
    return measured == len(cfg.batch_sizes)


def largest_batch(cfg: BenchmarkConfig, group: Group) -> dict:
    """The largest per-GPU batch that trains under this group's memory (doubling, then bisection).

    Simulated GPUs: the measured footprint against their capacity (with DDP's gradient buckets
    when the column has several processes). CUDA: real steps on the first process's GPUs, the
    network whole (or split as the layout splits it), without DDP's buckets.
    """
    devices = rank_devices(cfg, 0)
    spec = input_spec(cfg)
    result = {**group.to_dict(), "mode": "train", "batch_size": None, "limit": cfg.find_limit}
    if devices[0].type == "cpu" and cfg.memory_capacity_mb is None:
        return {**result, "message": "the CPU has no memory limit to find; give simulated GPUs a capacity"}
    built = build(cfg, Group(group.network, group.precision, "train", 1), spec, devices, cfg.batch_sizes[0], 1)
    autocast = autocast_for(devices[0], group.precision)
    if devices[0].type == "cuda":
        # Memory, not the loss scale, is the question: a disabled scaler keeps no state, so an fp16
        # probe that ran out mid-step never leaves an unscale or a skipped step to the next one.
        probe = dataclasses.replace(built, scaler=torch.amp.GradScaler("cuda", enabled=False))

        def one_step(batch: int) -> None:
            x, y = synthetic_batch(built.task, spec, batch, devices[0], cfg.channels_last)
            step(probe, x, y, autocast)

        fits = step_fits(one_step, devices[0], built.optimizer)
    else:
        buckets = parameter_bytes(built.plain) if cfg.processes(group.gpus) > 1 else 0

        def fits(batch: int) -> bool:
            need = measure_task_step(built, spec, batch, autocast, train=True, cfg=cfg)
            need[0] += buckets
            return max(need) <= cfg.memory_capacity_mb * MiB

    found = search_batch_size(fits, limit=cfg.find_limit)
    gc.collect()
    return {**result, "batch_size": found or None, "message": "" if found else "not even a batch of 1 fits"}


def run_benchmark(cfg: BenchmarkConfig, *, events: Events, stop: StopFlag) -> Outcome:
    groups = plan(cfg)
    total = len(groups) * len(cfg.batch_sizes)
    finds = sorted({(g.network, g.precision, g.gpus) for g in groups}) if cfg.find_largest else []
    counts = {"cells": 0, "oom": 0, "errors": 0}
    started = time.perf_counter()
    events.status(RUNNING, f"measuring {total} cells", total_cells=total, step=0)

    def emit(cell: dict) -> None:
        counts["cells"] += 1
        counts["oom"] += cell["status"] == "oom"
        counts["errors"] += cell["status"] == "error"
        events.emit(CELL, **cell)
        done = counts["cells"] / max(1, total + len(finds))
        elapsed = time.perf_counter() - started
        events.progress(100.0 * done, elapsed / done * (1 - done) if done else None, elapsed)

    for group in groups:
        if stop.requested:
            break
        run_group(cfg, group, emit=emit, stop=stop)
    for network, precision, gpus in finds:
        if stop.requested:
            break
        try:
            found = largest_batch(cfg, Group(network, precision, "train", gpus))
        except (OutOfMemory, RuntimeError) as exc:
            if not is_oom(exc) and not isinstance(exc, RuntimeError):
                raise
            found = {"network": network, "precision": precision, "gpus": gpus, "batch_size": None, "message": str(exc)}
        events.emit(LARGEST_BATCH, **found)
    summary = f"{counts['cells']} of {total} cells measured ({counts['oom']} out of memory, {counts['errors']} failed)"
    if stop.requested:
        return Outcome.stopped(f"stopped by {stop.signal_name or 'request'}: {summary}", **counts)
    if counts["errors"] == total:
        return Outcome.failed(EXIT_FAILED, f"every cell failed: {summary}", **counts)
    return Outcome.done(summary, **counts)
