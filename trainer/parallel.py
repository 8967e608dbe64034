"""Model parallelism: one network split into consecutive stages, each on its own device.

A process that owns several GPUs (`TrainConfig.model_parallel` of them) places the network's
blocks across them in forward order, so a model too big for one GPU's memory still trains; data
parallelism (DDP) then runs across such groups of GPUs. The split is naive pipelining, as in
DIGITS-era multi-GPU frameworks: stage k waits for stage k-1 (no micro-batch overlap), so it buys
memory, not speed.

The network is not rewritten (its state_dict keys stay the same, so checkpoints, resume and
exports do not know it was split): blocks are moved to their device, a hook moves each block's
inputs to that device, and the network's output comes back to the first device, where the loss and
the metrics live.

A block is a unit that is never cut: a child of the network, or of an `nn.Sequential` (or another
container whose forward is a plain chain of its children) below it. Residual blocks, inception
modules and transformer layers are units, so no skip connection crosses a stage boundary.
Stages are balanced on each block's estimated training memory (parameters, gradients, optimizer
state, and the activations of a batch), measured once on a sample input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torchvision.models.vision_transformer import Encoder


class SplitError(ValueError):
    """The network cannot be split as asked; the message says why."""


# Containers whose forward only calls their children one after the other (their own parameters, if
# any, are used before the first child): they can be opened into their children.
CHAIN_CONTAINERS: tuple[type[nn.Module], ...] = (nn.Sequential, Encoder)
CHAIN_FORWARDS = {container.forward for container in CHAIN_CONTAINERS}


@dataclass
class Block:
    name: str
    module: nn.Module
    parameter_bytes: int = 0
    activation_bytes: int = 0  # per sample: every output computed inside the block

    def memory(self, batch: int) -> int:
        """Training memory estimate: weights, their gradients and two optimizer moments (Adam's,
        the most any solver keeps), and the activations that backward keeps for a batch."""
        return 4 * self.parameter_bytes + batch * self.activation_bytes


@dataclass
class Stage:
    device: torch.device
    blocks: list[Block]
    batch: int

    @property
    def memory(self) -> int:
        return sum(block.memory(self.batch) for block in self.blocks)

    def describe(self) -> str:
        first, last = self.blocks[0].name, self.blocks[-1].name
        span = first if first == last else f"{first} .. {last}"
        return f"{self.device}: {span} ({len(self.blocks)} blocks, ~{self.memory / 2**20:,.0f} MiB)"


def _candidate_blocks(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The network's children, with chain containers opened recursively, in registration order."""
    blocks: list[tuple[str, nn.Module]] = []

    def visit(prefix: str, module: nn.Module) -> None:
        for name, child in module.named_children():
            # Only the containers' own forward is known to be a chain: a subclass may override it.
            chain = isinstance(child, CHAIN_CONTAINERS) and type(child).forward in CHAIN_FORWARDS
            if chain and any(True for _ in child.children()):
                visit(f"{prefix}{name}.", child)
            else:
                blocks.append((f"{prefix}{name}", child))

    visit("", model)
    return blocks


def forward_blocks(model: nn.Module, sample: torch.Tensor) -> list[Block]:
    """The blocks that one forward pass of `sample` (one input) calls, in call order, with their
    parameter and activation sizes. Runs in eval mode without gradients: batch-norm statistics are
    left untouched."""
    called: list[Block] = []
    handles = []

    def count_output(_module: nn.Module, _args: Any, output: Any) -> None:
        if called and isinstance(output, torch.Tensor):
            called[-1].activation_bytes += output.numel() * output.element_size()

    for name, module in _candidate_blocks(model):

        def enter(_module: nn.Module, _args: Any, *, name: str = name, module: nn.Module = module) -> None:
            if any(block.module is module for block in called):
                raise SplitError(f"the block {name} is called twice in one forward pass; it cannot be placed")
            parameter_bytes = sum(p.numel() * p.element_size() for p in module.parameters())
            called.append(Block(name, module, parameter_bytes))

        handles.append(module.register_forward_pre_hook(enter))
        handles += [inner.register_forward_hook(count_output) for inner in module.modules()]
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(sample)
    finally:
        model.train(was_training)
        for handle in handles:
            handle.remove()
    return called


def balance(blocks: Sequence[Block], stages: int, batch: int) -> list[list[Block]]:
    """Consecutive groups of `blocks`, `stages` of them, minimising the largest group's memory
    (the fullest GPU is the one that runs out); exact, by dynamic programming over the cuts.

    Memory, not FLOPs: the stages run one after the other, so how the compute is shared does not
    change the step time, while the largest stage decides whether the model fits at all."""
    count = len(blocks)
    if count < stages:
        raise SplitError(f"the network has {count} blocks; it cannot be split into {stages} stages")
    prefix = [0]
    for block in blocks:
        prefix.append(prefix[-1] + max(1, block.memory(batch)))
    inf = float("inf")
    # best[s][i]: the smallest possible largest stage when the first i blocks form s stages.
    best = [[inf] * (count + 1) for _ in range(stages + 1)]
    cut = [[0] * (count + 1) for _ in range(stages + 1)]
    best[0][0] = 0
    for s in range(1, stages + 1):
        for i in range(s, count + 1):
            for j in range(s - 1, i):
                cost = max(best[s - 1][j], prefix[i] - prefix[j])
                if cost < best[s][i]:
                    best[s][i], cut[s][i] = cost, j
    groups: list[list[Block]] = []
    end = count
    for s in range(stages, 0, -1):
        start = cut[s][end]
        groups.append(list(blocks[start:end]))
        end = start
    return groups[::-1]


def _to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=True)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(_to_device(item, device) for item in value))
    if isinstance(value, list | tuple):
        return type(value)(_to_device(item, device) for item in value)
    if isinstance(value, dict):
        return {key: _to_device(item, device) for key, item in value.items()}
    return value


def split_model(
    model: nn.Module,
    devices: Sequence[torch.device],
    sample: torch.Tensor,
    *,
    batch: int,
    memory_format: torch.memory_format = torch.preserve_format,
    output_device: torch.device | None = None,
) -> list[Stage]:
    """Places `model` across `devices` (one stage each, in forward order) and returns the stages.

    `sample` is one input (a batch of one) on the CPU, used to find the blocks and their sizes;
    `batch` is the batch each forward pass will see. The network's output comes back on
    `output_device` (the first device by default).
    """
    blocks = forward_blocks(model, sample)
    groups = balance(blocks, len(devices), batch)
    stages = [Stage(torch.device(device), group, batch) for device, group in zip(devices, groups, strict=True)]
    placed: dict[int, torch.device] = {}
    for stage in stages:
        for block in stage.blocks:
            block.module.to(stage.device, memory_format=memory_format)
            placed[id(block.module)] = stage.device
            block.module.register_forward_pre_hook(
                lambda _module, args, kwargs, device=stage.device: (
                    _to_device(args, device),
                    _to_device(kwargs, device),
                ),
                with_kwargs=True,
            )
    _place_containers(model, [block for stage in stages for block in stage.blocks], placed, stages[0].device)
    target = torch.device(output_device) if output_device is not None else stages[0].device
    model.register_forward_hook(lambda _module, _args, output: _to_device(output, target))
    return stages


def _place_containers(
    model: nn.Module, order: list[Block], placed: dict[int, torch.device], first: torch.device
) -> None:
    """Moves what no block holds: a container's own parameters and buffers (ViT's position
    embedding, the network's class token) go where the container's input arrives, the device of
    the block called just before its first block (the first device for the network itself), since
    a chain container uses them before its first child. Modules a forward pass never calls go to
    the first device."""
    index = {id(block.module): number for number, block in enumerate(order)}

    def arrival(container: nn.Module) -> torch.device:
        numbers = [index[id(m)] for m in container.modules() if id(m) in index]
        if container is model or not numbers or min(numbers) == 0:
            return first
        return placed[id(order[min(numbers) - 1].module)]

    def visit(module: nn.Module) -> None:
        if id(module) in placed:
            return
        device = arrival(module)
        # Before the optimizer exists, so a parameter may be replaced by its moved copy.
        for name, parameter in module._parameters.items():
            if parameter is not None:
                module._parameters[name] = nn.Parameter(parameter.detach().to(device), parameter.requires_grad)
        for name, buffer in module._buffers.items():
            if buffer is not None:
                module._buffers[name] = buffer.to(device)
        for child in module.children():
            visit(child)

    visit(model)
