"""Out-of-memory: recognise it, and say what to change (batch sizes, device memory, what fits)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from trainer.config import TrainConfig

_CPU_OOM = ("DefaultCPUAllocator: can't allocate memory", "DefaultCPUAllocator: not enough memory")


class OutOfMemory(RuntimeError):
    pass


def is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.cuda.OutOfMemoryError | OutOfMemory):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (any(s in text for s in _CPU_OOM) or "CUDA out of memory" in text)


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def device_memory(device: torch.device) -> str:
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        return f"{device} ({torch.cuda.get_device_name(device)}, {_gib(total)} total, {_gib(free)} free)"
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        available = next(
            int(line.split()[1]) * 1024
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemAvailable:")
        )
        return f"cpu ({_gib(total)} RAM, {_gib(available)} available)"
    except (OSError, ValueError, StopIteration):
        return "cpu"


def known_fit(run_dir: str) -> int | None:
    """The largest global batch `find_batch_size` recorded for this run, if it ran."""
    try:
        return int(json.loads((Path(run_dir) / "batch_size.json").read_text())["max_batch_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def oom_message(cfg: TrainConfig, devices: list[torch.device], exc: BaseException | None = None) -> str:
    """`devices`: the failing process's devices (several when the network is split over them)."""
    message = (
        f"out of memory with global batch size {cfg.batch_size} ({cfg.per_process_batch} per process x "
        f"{cfg.world_size} process(es)"
        + (f", {cfg.micro_batch} per micro-batch with grad_accum {cfg.grad_accum}" if cfg.grad_accum > 1 else "")
        + f") on {', '.join(device_memory(device) for device in devices)}, "
        f"network {cfg.network}, precision {cfg.precision}. "
    )
    fit = known_fit(cfg.run_dir)
    if fit:
        message += f"The largest batch size that fits is {fit}. "
    else:
        message += "Lower batch_size, raise grad_accum, use bf16, or run `python -m trainer find-batch-size`. "
        if devices[0].type == "cuda":
            message += "A network too big for one GPU can be split over several (model_parallel). "
    if exc is not None:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        message += f"({first[:200]})"
    return message
