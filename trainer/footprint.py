"""The memory a training step needs, measured on any device, and simulated GPU capacity.

A simulated GPU trains on the CPU, where nothing limits memory the way a GPU's does. To make the
benchmark's OOM cells and the batch-size finder testable there, a step's footprint is measured
by one forward pass that records every tensor autograd keeps for backward (saved-tensor hooks),
plus the weights, their gradients and the optimizer's momentum, plus the input batch. A step
that needs more than the simulated capacity raises `OutOfMemory`, the error the trainer already
handles for CUDA's out-of-memory (`trainer.memory.is_oom`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

import torch
from torch import nn

from trainer.memory import OutOfMemory

MiB = 2**20


def _bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def parameter_bytes(modules: Sequence[nn.Module] | nn.Module) -> int:
    items = [modules] if isinstance(modules, nn.Module) else modules
    seen: set[int] = set()
    total = 0
    for module in items:
        for parameter in module.parameters():
            if id(parameter) not in seen:
                seen.add(id(parameter))
                total += _bytes(parameter)
    return total


def measure_step(
    model: nn.Module,
    x: torch.Tensor,
    autocast: Callable[[], contextlib.AbstractContextManager],
    *,
    train: bool = True,
    stage_modules: Sequence[Sequence[nn.Module]] = (),
    call: Callable[[nn.Module, torch.Tensor], object] | None = None,
) -> list[int]:
    """Bytes one step of `model` on batch `x` needs, per stage (one entry when it is whole).

    Train: 3 x the weights (weights, gradients, SGD momentum) + the tensors saved for backward.
    Forward only: the weights + twice the largest activation (one layer's input and output).
    `stage_modules`: the blocks of each stage of a split network, to attribute activations.
    `call(model, x)`: the step's forward (a task's loss with its targets); `model(x)` by default.
    """
    forward = call or (lambda module, batch: module(batch))
    stages = [list(group) for group in stage_modules] or [[model]]
    current = [0]
    saved = [0] * len(stages)
    largest = [0] * len(stages)
    seen: set[tuple[int, int]] = set()
    handles = []
    for number, group in enumerate(stages):
        for module in group:
            handles.append(module.register_forward_pre_hook(lambda *_, n=number: current.__setitem__(0, n)))

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset())
        if key not in seen:  # one storage saved by several ops is held once
            seen.add(key)
            saved[current[0]] += _bytes(tensor)
        return tensor

    def output(_module: nn.Module, _args, out) -> None:
        if isinstance(out, torch.Tensor):
            largest[current[0]] = max(largest[current[0]], _bytes(out))

    handles += [m.register_forward_hook(output) for m in model.modules() if not list(m.children())]
    seen.add((x.untyped_storage().data_ptr(), x.storage_offset()))  # the batch is counted below
    try:
        if train:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast():
                forward(model, x)
        else:
            with torch.no_grad(), autocast():
                forward(model, x)
    finally:
        for handle in handles:
            handle.remove()
    weights = [parameter_bytes(group) for group in stages]
    if len(stages) > 1:  # what no block holds (a container's own parameters) sits on stage one
        weights[0] += parameter_bytes(model) - sum(weights)
    if train:
        need = [3 * w + s for w, s in zip(weights, saved, strict=True)]
    else:
        need = [w + 2 * a for w, a in zip(weights, largest, strict=True)]
    need[0] += _bytes(x)
    return need


def check_capacity(need: Sequence[int], capacity_mb: int | None, *, batch: int, devices: Sequence[str]) -> None:
    """Raises OutOfMemory naming the batch and the memory when a stage needs more than a
    simulated GPU holds; nothing when there is no capacity (real CUDA enforces its own)."""
    if capacity_mb is None:
        return
    for device, bytes_needed in zip(devices, need, strict=False):
        if bytes_needed > capacity_mb * MiB:
            raise OutOfMemory(
                f"simulated GPU out of memory: batch {batch} needs {bytes_needed / MiB:,.1f} MiB on "
                f"{device}, which holds {capacity_mb:,} MiB",
            )
