"""The weights' average (trainer/ema.py) and the one rule of which validation picks best.pt
(trainer.protocol.checkpoint_series): the engine saves by it, and the workbench reads a run's
config through trainer.recipes.averages_weights to say the same "best"."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trainer import engine
from trainer.config import config_from_dict
from trainer.protocol import checkpoint_series
from trainer.recipes import averages_weights


@pytest.mark.parametrize(
    "raw",
    [
        {},
        {"solver": {"ema_decay": 0.99}},
        {"solver": {"ema_decay": 0}},
        {"preset": "deit"},
        {"preset": "torchvision_resnet_v2", "solver": {"ema_decay": 0}},
        {"preset": "finetune_small"},
    ],
)
def test_it_reads_whether_a_config_as_sent_averages_its_weights_as_the_trainer_does(raw):
    cfg = config_from_dict({"run_dir": "r", **raw}, check_paths=False)
    assert averages_weights(raw) == (cfg.solver.ema_decay > 0)
    assert checkpoint_series("top1", averaged=averages_weights(raw)) == ("ema_top1" if cfg.solver.ema_decay else "top1")


def test_it_saves_the_best_checkpoint_on_the_averages_validation(monkeypatch):
    # The raw weights peak at the second validation, their average at the third: best.pt must
    # follow the average (what the checkpoints hold), and the event reports both.
    raw = iter([{"top1": 0.5}, {"top1": 0.9}, {"top1": 0.8}])
    averaged = iter([{"top1": 0.4}, {"top1": 0.7}, {"top1": 0.85}])
    monkeypatch.setattr(engine, "evaluate", lambda run, model=None: next(raw if model is None else averaged))
    saved: list[tuple[bool, dict]] = []
    monkeypatch.setattr(
        engine, "save_checkpoint", lambda run, *, is_best=False, metrics=None: saved.append((is_best, metrics))
    )
    reported: list[dict] = []
    events = SimpleNamespace(validation=lambda **fields: reported.append(fields))
    run = SimpleNamespace(
        data=SimpleNamespace(val_loader=[]), ema=SimpleNamespace(module=object()), best_metric="top1", best=None,
        rank=0, early=None, step=0, epoch=0.0, events=events,
    )  # fmt: skip
    for epoch in (1, 2, 3):
        run.step, run.epoch = 10 * epoch, float(epoch)
        engine.validate_and_maybe_save(run, snapshot=False)
    assert [best for best, _ in saved] == [True, True, True]  # 0.4, then 0.7, then 0.85: each a new best
    assert [metrics["ema_top1"] for _, metrics in saved] == [0.4, 0.7, 0.85] and run.best == 0.85
    assert reported[-1] == {"step": 30, "epoch": 3.0, "top1": 0.8, "ema_top1": 0.85}
