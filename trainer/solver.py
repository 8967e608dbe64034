"""Optimizers and learning-rate policies (Caffe's formulas, DIGITS' percent convention).

The policy is one pure function of the optimizer step, `lr_at(solver, step, total_steps)`; the
training scheduler is a LambdaLR over that same function and `lr_curve()` samples it for the
web form's preview, so the preview is exactly what training will do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn

from trainer.config import LR_POLICIES, OPTIMIZERS, SolverConfig, TrainConfig


def build_optimizer(solver: SolverConfig, params: Iterable[nn.Parameter] | list[dict]) -> torch.optim.Optimizer:
    name, lr, wd = solver.optimizer, solver.base_lr, solver.weight_decay
    if name in ("sgd", "nesterov"):
        return torch.optim.SGD(params, lr=lr, momentum=solver.momentum, weight_decay=wd, nesterov=name == "nesterov")
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, betas=solver.betas, weight_decay=wd)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=solver.betas, weight_decay=wd)
    if name == "lamb":
        # timm's LAMB (layer-wise trust ratios: large-batch training); its own gradient-norm
        # clipping is off, solver.grad_clip_norm is the one place clipping is set.
        from timm.optim import Lamb  # timm: loaded only where this runs

        return Lamb(params, lr=lr, betas=solver.betas, weight_decay=wd, max_grad_norm=None)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, momentum=solver.momentum, weight_decay=wd)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr, weight_decay=wd)
    if name == "adadelta":
        return torch.optim.Adadelta(params, lr=lr, weight_decay=wd)
    raise ValueError(f"solver.optimizer: {name!r} is not one of {', '.join(OPTIMIZERS)}")


def _policy_lr(s: SolverConfig, it: int, total: int) -> float:
    base, gamma, power = s.base_lr, s.gamma, s.power
    policy = s.lr_policy
    if policy == "fixed":
        return base
    if policy == "step":
        # DIGITS: step_size is a percent of the run; Caffe: base * gamma ^ floor(iter / stepsize)
        stepsize = max(1, round(total * s.step_size / 100))
        return base * gamma ** (it // stepsize)
    if policy == "multistep":
        boundaries = [round(total * v / 100) for v in s.step_values]
        return base * gamma ** sum(1 for b in boundaries if it >= b)
    if policy == "exp":
        return base * gamma**it
    if policy == "inv":
        return base * (1 + gamma * it) ** (-power)
    if policy == "poly":
        return base * max(0.0, 1 - it / total) ** power
    if policy == "sigmoid":
        stepsize = round(total * s.step_size / 100)
        # The logistic written so that exp() only ever sees a non-positive argument: far from the
        # midpoint of a long run, exp(-gamma * (it - stepsize)) overflows a float (OverflowError).
        x = gamma * (it - stepsize)
        return base / (1 + math.exp(-x)) if x >= 0 else base * math.exp(x) / (1 + math.exp(x))
    if policy == "cosine":
        return s.min_lr + (base - s.min_lr) * 0.5 * (1 + math.cos(math.pi * min(it, total) / total))
    if policy == "onecycle":
        # torch.optim.lr_scheduler.OneCycleLR's cosine form: base_lr is the peak.
        start, end = base / s.onecycle_div_factor, base / s.onecycle_div_factor / s.onecycle_final_div_factor
        up = max(1.0, s.onecycle_pct_start * total - 1)
        if it <= up:
            return start + (base - start) * 0.5 * (1 - math.cos(math.pi * it / up))
        down = max(1.0, total - 1 - up)
        frac = min(1.0, (it - up) / down)
        return end + (base - end) * 0.5 * (1 + math.cos(math.pi * frac))
    raise ValueError(f"solver.lr_policy: {policy!r} is not one of {', '.join(LR_POLICIES)}")


def lr_at(solver: SolverConfig, step: int, total_steps: int) -> float:
    """The learning rate used for optimizer step `step` (0-based) of a `total_steps` run."""
    total = max(1, total_steps)
    lr = _policy_lr(solver, step, total)
    warmup = round(total * solver.warmup_percent / 100)
    if step < warmup:
        # Linear warmup from ~0: large early updates on random weights (big batches, Adam's
        # unreliable second moments) are what diverges; warmup scales the policy's value.
        lr *= (step + 1) / (warmup + 1)
    return lr


def build_scheduler(
    solver: SolverConfig, optimizer: torch.optim.Optimizer, total_steps: int, *, frozen: list[int] | None = None
) -> torch.optim.lr_scheduler.LambdaLR:
    """The policy on every parameter group (each scaled from its own initial rate); `frozen[i]`:
    group i's rate is 0 for its first steps (fine-tuning's frozen backbone, trainer/finetune/recipe.py)."""
    base = solver.base_lr

    def scale(step: int) -> float:
        return lr_at(solver, step, total_steps) / base

    if not frozen or not any(frozen):
        return torch.optim.lr_scheduler.LambdaLR(optimizer, scale)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, [lambda step, until=until: 0.0 if step < until else scale(step) for until in frozen]
    )


def total_steps(epochs: float, train_count: int, batch_size: int) -> int:
    """Optimizer steps of a run: the engine drops each epoch's incomplete last global batch.
    The web app's LR preview must use this to show exactly the run's curve."""
    return max(1, round(epochs * (train_count // batch_size)))


def lr_curve(config: TrainConfig | SolverConfig, total_steps: int, points: int = 200) -> list[tuple[int, float]]:
    """(step, lr) pairs at `points` evenly spaced steps (always including the first and last)."""
    solver = config.solver if isinstance(config, TrainConfig) else config
    total = max(1, total_steps)
    count = max(2, min(points, total))
    steps = sorted({round(i * (total - 1) / (count - 1)) for i in range(count)})
    return [(s, lr_at(solver, s, total)) for s in steps]
