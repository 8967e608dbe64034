"""Throughput measurement shared by the bench/ scripts: the engine's own loop on in-memory
batches versus a minimal hand-written PyTorch loop doing the same work."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from trainer.config import TrainConfig
from trainer.engine import Run, StopFlag, build_run, torch_device, train_one_epoch
from trainer.events import Events


class InMemoryLoader:
    """Pre-made uint8 batches, re-iterated every epoch (no decoding, no workers)."""

    def __init__(self, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


def random_batches(
    count: int, batch: int, shape: tuple[int, int, int], num_classes: int, device: torch.device | str = "cpu"
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    return [
        (
            torch.randint(0, 256, (batch, *shape), generator=gen, dtype=torch.uint8).to(device),
            torch.randint(0, num_classes, (batch,), generator=gen).to(device),
        )
        for _ in range(count)
    ]


@dataclass
class Timing:
    images_per_sec: float  # wall clock
    seconds: float
    steps: int
    images_per_cpu_sec: float = 0.0  # process CPU time: robust to neighbours on a shared CPU


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def engine_run_in_memory(cfg: TrainConfig, batches: list, device: torch.device) -> Run:
    """Rank 0 of `cfg` training from `batches` (already on `device`, its first stage's device)."""
    devices = [torch_device(name) for name in cfg.rank_devices(0)]
    run = build_run(cfg, rank=0, world=1, devices=devices, events=Events(None), stop=StopFlag())
    run.data.train_loader = InMemoryLoader(batches)
    run.data.steps_per_epoch = len(batches)
    run.total_steps = 10**9  # never reach the end-of-run validation/snapshot while timing
    return run


def time_engine(run: Run, epochs: int) -> Timing:
    """`epochs` passes over the in-memory batches through `train_one_epoch` (after one warm-up)."""
    train_one_epoch(run, run.step // run.data.steps_per_epoch)
    _sync(run.device)
    start, cpu_start, steps0 = time.perf_counter(), time.process_time(), run.step
    for _ in range(epochs):
        train_one_epoch(run, run.step // run.data.steps_per_epoch)
    _sync(run.device)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    images = (run.step - steps0) * run.cfg.batch_size
    return Timing(images / seconds, seconds, run.step - steps0, images / max(cpu, 1e-9))


def time_minimal_loop(
    model: nn.Module,
    batches: list,
    mean: torch.Tensor | None,
    device: torch.device,
    lr: float,
    momentum: float,
    epochs: int,
    precision: str = "fp32",
    channels_last: bool = False,
) -> Timing:
    """The baseline: the fewest lines that train the same model on the same batches."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model.train()

    def one_pass() -> None:
        for images, labels in batches:
            x = images.to(device, non_blocking=True).float()
            if mean is not None:
                x = x - mean
            x = (x / 255).contiguous(memory_format=fmt)
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss = nn.functional.cross_entropy(model(x), labels.to(device, non_blocking=True))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

    one_pass()
    _sync(device)
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(epochs):
        one_pass()
    _sync(device)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    steps = epochs * len(batches)
    images = steps * batches[0][0].shape[0]
    return Timing(images / seconds, seconds, steps, images / max(cpu, 1e-9))
