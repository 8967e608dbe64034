"""The weights' average (trainer/ema.py) and the one rule of which weights a checkpoint holds
(trainer.protocol.checkpoint_weights, issue 33): the better of the raw weights and their average
at each validation, or the config's `best_weights`; the engine saves by it, and the workbench
reads a run's config through trainer.recipes.averages_weights to say the same "best"."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from trainer import engine
from trainer.config import ConfigError, config_from_dict
from trainer.early_stop import improves
from trainer.ema import checkpoint_models, resumed_models
from trainer.events import ListReporter
from trainer.protocol import EXIT_DONE, best_checkpoint, checkpoint_series, checkpoint_weights, latest_checkpoint
from trainer.recipes import averages_weights
from trainer.run import train

from .conftest import make_config


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


def _validate(monkeypatch, raw_values, averaged_values, *, forced=None, metric="top1"):
    """validate_and_maybe_save over validations whose raw and averaged results are given; returns
    the run and (is_best, metrics) of each checkpoint it saved."""
    raw, averaged = iter(raw_values), iter(averaged_values)
    monkeypatch.setattr(engine, "evaluate", lambda run, model=None: next(raw if model is None else averaged))
    saved: list[tuple[bool, dict]] = []
    monkeypatch.setattr(
        engine, "save_checkpoint", lambda run, *, is_best=False, metrics=None: saved.append((is_best, metrics))
    )
    reported: list[dict] = []
    events = SimpleNamespace(validation=lambda **fields: reported.append(fields))
    run = SimpleNamespace(
        data=SimpleNamespace(val_loader=[]), ema=SimpleNamespace(module=object()), best_metric=metric, best=None,
        rank=0, early=None, step=0, epoch=0.0, events=events, cfg=SimpleNamespace(best_weights=forced), weights="ema",
    )  # fmt: skip
    for epoch in range(1, len(raw_values) + 1):
        run.step, run.epoch = 10 * epoch, float(epoch)
        engine.validate_and_maybe_save(run, snapshot=False)
    run.reported = reported
    return run, saved


def test_it_saves_the_better_weights_when_the_average_trails_far(monkeypatch):
    # Issue 33: raw top-1 39.7 %, the average 9.6 % (a decay too slow for the run): best.pt must
    # hold the raw weights, and say so.
    run, saved = _validate(monkeypatch, [{"top1": 0.30}, {"top1": 0.397}], [{"top1": 0.05}, {"top1": 0.096}])
    assert [(best, metrics["weights"], metrics["top1"]) for best, metrics in saved] == [
        (True, "raw", 0.30),
        (True, "raw", 0.397),
    ]
    assert run.best == 0.397 and run.weights == "raw"
    assert run.reported[-1] == {"step": 20, "epoch": 2.0, "top1": 0.397, "ema_top1": 0.096, "weights": "raw"}


def test_it_picks_per_validation_and_keeps_the_better_of_all(monkeypatch):
    # The raw weights lead early, the average later: each validation offers its better, and best
    # moves only when that is at least as good as the best so far.
    run, saved = _validate(
        monkeypatch, [{"top1": 0.5}, {"top1": 0.9}, {"top1": 0.8}], [{"top1": 0.4}, {"top1": 0.7}, {"top1": 0.95}]
    )
    assert [(metrics["weights"], best) for best, metrics in saved] == [("raw", True), ("raw", True), ("ema", True)]
    assert run.best == 0.95


def test_it_follows_the_direction_of_the_metric(monkeypatch):
    run, saved = _validate(monkeypatch, [{"val_loss": 0.4}], [{"val_loss": 0.9}], metric="val_loss")
    assert saved[0][1]["weights"] == "raw" and run.best == 0.4


@pytest.mark.parametrize("forced", ["raw", "ema"])
def test_it_holds_the_weights_the_config_forces(monkeypatch, forced):
    run, saved = _validate(monkeypatch, [{"top1": 0.397}], [{"top1": 0.096}], forced=forced)
    assert saved[0][1]["weights"] == forced
    assert run.best == (0.397 if forced == "raw" else 0.096)


def test_it_keeps_the_latest_of_equal_values():
    # Issue 33: ties kept the earliest checkpoint; the later one (more training, same number) wins.
    assert improves("top1", 0.5, 0.5) and improves("val_loss", 0.2, 0.2)
    assert not improves("top1", 0.49, 0.5) and not improves("val_loss", 0.21, 0.2)
    # The same rule for the two weights at one validation: a tie goes to the average.
    assert checkpoint_weights("top1", {"top1": 0.5, "ema_top1": 0.5}, averaged=True) == "ema"
    assert checkpoint_weights("top1", {"top1": 0.5, "ema_top1": 0.9}, averaged=False) == "raw"


def test_it_refuses_a_best_weights_it_cannot_hold():
    with pytest.raises(ConfigError, match="best_weights.*not one of raw, ema"):
        config_from_dict({"run_dir": "r", "best_weights": "both"}, check_paths=False)
    with pytest.raises(ConfigError, match="best_weights.*ema_decay above 0"):
        config_from_dict({"run_dir": "r", "best_weights": "ema"}, check_paths=False)
    cfg = config_from_dict({"run_dir": "r", "best_weights": "raw", "solver": {"ema_decay": 0.99}}, check_paths=False)
    assert cfg.best_weights == "raw"


def test_it_keeps_both_weights_for_a_resume_whichever_a_checkpoint_delivers():
    model, average = torch.nn.Linear(2, 1), SimpleNamespace(module=torch.nn.Linear(2, 1))
    for weights in ("raw", "ema"):
        state = checkpoint_models(model, average, weights)
        delivered = model if weights == "raw" else average.module
        assert state["weights"] == weights and torch.equal(state["model"]["weight"], delivered.weight)
        raw, averaged = resumed_models(state)
        assert torch.equal(raw["weight"], model.weight) and torch.equal(averaged["weight"], average.module.weight)
    # A checkpoint written before issue 33: the average as `model`, the raw weights as `model_raw`.
    old = {"model": average.module.state_dict(), "model_raw": model.state_dict()}
    raw, averaged = resumed_models(old)
    assert torch.equal(raw["weight"], model.weight) and torch.equal(averaged["weight"], average.module.weight)


def test_it_delivers_the_raw_weights_of_a_run_whose_average_trails(tmp_path, gray8):
    # A decay of 0.999999 keeps the average near its random start for a two-epoch run: the best
    # checkpoint holds the trained weights, which inference and exports load as its `model`.
    cfg = make_config(tmp_path / "run", gray8, epochs=2, solver={"ema_decay": 0.999999})
    reporter = ListReporter()
    assert train(cfg, reporter=reporter) == EXIT_DONE
    state = torch.load(best_checkpoint(cfg.run_dir), weights_only=True)
    last = reporter.of_type("validation")[-1]
    expected = checkpoint_weights("top1", last, averaged=True)
    assert last["weights"] == state["weights"] == expected and (state["model_raw"] is None) == (expected == "raw")


def test_it_resumes_the_average_from_a_checkpoint_that_holds_the_raw_weights(tmp_path, gray8):
    cfg = make_config(tmp_path / "run", gray8, epochs=1, best_weights="raw", solver={"ema_decay": 0.9})
    assert train(cfg, reporter=ListReporter()) == EXIT_DONE
    first = torch.load(latest_checkpoint(cfg.run_dir), weights_only=True)
    assert first["weights"] == "raw" and first["model_raw"] is None and first["model_ema"] is not None
    longer = make_config(tmp_path / "run", gray8, epochs=2, best_weights="raw", solver={"ema_decay": 0.9})
    reporter = ListReporter()
    assert train(longer, reporter=reporter, resume=True) == EXIT_DONE
    assert reporter.of_type("status")[1]["resumed_from_step"] == first["step"] > 0
    assert reporter.of_type("validation")[-1]["weights"] == "raw"
