"""LR policies follow Caffe's formulas (DIGITS' percent convention); training uses lr_curve's values."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.config import SolverConfig
from trainer.solver import build_optimizer, build_scheduler, lr_at, lr_curve

TOTAL = 200
BASE = 0.1


def _solver(**kw) -> SolverConfig:
    return SolverConfig(base_lr=BASE, **kw)


FORMULAS = {
    "fixed": (dict(), lambda it: BASE),
    "step": (dict(gamma=0.5, step_size=25.0), lambda it: BASE * 0.5 ** math.floor(it / 50)),
    "multistep": (dict(gamma=0.1, step_values=[50.0, 75.0]), lambda it: BASE * 0.1 ** ((it >= 100) + (it >= 150))),
    "exp": (dict(gamma=0.99), lambda it: BASE * 0.99**it),
    "inv": (dict(gamma=0.01, power=0.75), lambda it: BASE * (1 + 0.01 * it) ** -0.75),
    "poly": (dict(power=2.0), lambda it: BASE * (1 - it / TOTAL) ** 2),
    "sigmoid": (dict(gamma=-0.05, step_size=50.0), lambda it: BASE / (1 + math.exp(0.05 * (it - 100)))),
    "cosine": (dict(min_lr=0.001), lambda it: 0.001 + (BASE - 0.001) * 0.5 * (1 + math.cos(math.pi * it / TOTAL))),
}


@pytest.mark.parametrize("policy", sorted(FORMULAS))
def test_it_matches_the_caffe_formula(policy):
    kwargs, formula = FORMULAS[policy]
    solver = _solver(lr_policy=policy, **kwargs)
    for it in range(TOTAL):
        assert lr_at(solver, it, TOTAL) == pytest.approx(formula(it), rel=1e-12, abs=1e-15), it


def test_it_runs_onecycle_up_then_down():
    solver = _solver(
        lr_policy="onecycle", onecycle_pct_start=0.3, onecycle_div_factor=25, onecycle_final_div_factor=1e4
    )
    lrs = [lr_at(solver, it, TOTAL) for it in range(TOTAL)]
    peak = max(range(TOTAL), key=lrs.__getitem__)
    assert lrs[0] == pytest.approx(BASE / 25)
    assert lrs[peak] == pytest.approx(BASE) and 55 <= peak <= 60
    assert lrs[-1] == pytest.approx(BASE / 25 / 1e4, rel=1e-6)
    assert all(a <= b for a, b in zip(lrs[:peak], lrs[1 : peak + 1], strict=True))
    assert all(a >= b for a, b in zip(lrs[peak:-1], lrs[peak + 1 :], strict=True))


def test_it_warms_up_linearly_then_follows_the_policy():
    solver = _solver(lr_policy="step", gamma=0.5, step_size=25.0, warmup_percent=5.0)  # 10 steps
    assert [lr_at(solver, i, TOTAL) for i in range(3)] == pytest.approx([BASE / 11, 2 * BASE / 11, 3 * BASE / 11])
    assert lr_at(solver, 10, TOTAL) == pytest.approx(BASE)
    assert lr_at(solver, 60, TOTAL) == pytest.approx(BASE * 0.5)


@pytest.mark.parametrize("policy", ["step", "multistep", "exp", "inv", "poly", "sigmoid", "cosine", "onecycle"])
def test_it_trains_with_exactly_the_previewed_curve(policy):
    solver = _solver(lr_policy=policy, gamma=0.97 if policy == "exp" else 0.1, warmup_percent=3.0)
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = build_optimizer(solver, [param])
    scheduler = build_scheduler(solver, optimizer, TOTAL)
    used = []
    for _ in range(TOTAL):
        used.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    preview = dict(lr_curve(solver, TOTAL, points=TOTAL))
    assert len(preview) == TOTAL
    assert used == pytest.approx([preview[i] for i in range(TOTAL)], rel=1e-12)
    sparse = lr_curve(solver, TOTAL, points=11)
    assert [s for s, _ in sparse] == [0, 20, 40, 60, 80, 100, 119, 139, 159, 179, 199]


@pytest.mark.parametrize("name", ["sgd", "nesterov", "adam", "adamw", "rmsprop", "adagrad", "adadelta"])
def test_it_builds_every_optimizer_by_name(name):
    optimizer = build_optimizer(
        SolverConfig(optimizer=name, base_lr=0.01, weight_decay=1e-4), [torch.nn.Parameter(torch.ones(2))]
    )
    assert optimizer.param_groups[0]["lr"] == 0.01
    assert optimizer.param_groups[0].get("nesterov", False) is (name == "nesterov")


def test_it_keeps_the_sigmoid_policy_finite_far_from_its_midpoint():
    # 100,000 epochs of a small set: exp(0.1 * 33,000) overflowed a float at step 0 before.
    solver = _solver(lr_policy="sigmoid", gamma=0.1, step_size=33.0)
    total = 10_000_000
    assert lr_at(solver, 0, total) == 0.0
    assert lr_at(solver, total - 1, total) == pytest.approx(BASE)
    assert all(math.isfinite(lr) for _, lr in lr_curve(solver, total))
