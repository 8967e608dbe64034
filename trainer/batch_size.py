"""Find the largest batch that fits: doubling, then bisection between the last fit and first miss."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from trainer.config import TrainConfig
from trainer.engine import place_model, prepare, torch_device
from trainer.memory import is_oom
from trainer.networks import build_model


def search_batch_size(fits: Callable[[int], bool], *, start: int = 1, limit: int = 4096) -> int:
    """The largest b in [start, limit] with fits(b) (assumed monotone); 0 if even `start` fails."""
    if not fits(start):
        return 0
    good, bad = start, None
    while bad is None and good < limit:
        trial = min(good * 2, limit)
        if fits(trial):
            good = trial
        else:
            bad = trial
    if bad is None:
        return good
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good


def step_fits(
    step: Callable[[int], None], device: torch.device, optimizer: torch.optim.Optimizer
) -> Callable[[int], bool]:
    """A probe: whether `step(b)`, one forward + backward + optimizer step at batch b, fits the
    device; an out-of-memory is False, anything else is raised. The gradients and what the failed
    step left behind are freed before the next probe, so a miss never makes the next one miss."""

    def fits(batch: int) -> bool:
        try:
            step(batch)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            return True
        except (RuntimeError, torch.cuda.OutOfMemoryError) as exc:
            if not is_oom(exc):
                raise
            return False
        finally:
            optimizer.zero_grad(set_to_none=True)
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()

    return fits


def train_step_fits(
    model: nn.Module,
    shape: tuple[int, int, int],
    num_classes: int,
    device: torch.device,
    precision: str = "fp32",
    channels_last: bool = False,
) -> Callable[[int], bool]:
    """A classifier's probe: one forward + backward + SGD step at batch b on random data."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-9, momentum=0.9)
    memory_format = torch.channels_last if channels_last else torch.contiguous_format

    def step(batch: int) -> None:
        x = torch.randn(batch, *shape, device=device).contiguous(memory_format=memory_format)
        y = torch.randint(0, num_classes, (batch,), device=device)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()

    return step_fits(step, device, optimizer)


def find_batch_size(cfg: TrainConfig, *, limit: int = 4096, save: bool = True) -> int:
    """Largest global batch (per-process fit x processes) for `cfg`'s network on the first process's devices;
    recorded in `<run_dir>/batch_size.json` so an OOM message can quote it."""
    _, spec = prepare(cfg)
    devices = [torch_device(name) for name in cfg.rank_devices(0)]
    device = devices[0]
    model = build_model(cfg.network, spec)
    # Split as training splits it, for the configured batch; larger batches than that would shift
    # the balance towards activations, so the fit found is on the safe side.
    place_model(model, cfg, spec, devices)
    model.train()
    fits = train_step_fits(
        model, (spec.channels, spec.height, spec.width), spec.num_classes, device, cfg.precision, cfg.channels_last
    )
    per_process = search_batch_size(fits, limit=max(1, limit // cfg.world_size))
    total = per_process * cfg.world_size
    if save:
        Path(cfg.run_dir).mkdir(parents=True, exist_ok=True)
        (Path(cfg.run_dir) / "batch_size.json").write_text(
            json.dumps(
                {
                    "max_batch_size": total,
                    "per_process": per_process,
                    "device": ", ".join(str(d) for d in devices),
                    "network": cfg.network,
                    "precision": cfg.precision,
                }
            )
        )
    return total
