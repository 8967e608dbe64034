"""Early stopping: a run whose validation accuracy stops improving ends at the right epoch, done,
with its reason in the final status (the run's timeline), and the best checkpoint kept."""

from __future__ import annotations

import pytest
import torch

from trainer.config import ConfigError, TrainConfig
from trainer.early_stop import EarlyStopping, early_stop_outcome
from trainer.events import ListReporter
from trainer.protocol import EXIT_DONE, best_checkpoint, latest_checkpoint
from trainer.run import train

from .conftest import make_config


def test_it_counts_validations_without_an_improvement_larger_than_the_delta():
    stopper = EarlyStopping("top1", patience=2, min_delta=0.01)
    for epoch, value in enumerate([0.50, 0.60, 0.605, 0.70, 0.70, 0.709], start=1):
        stopper.update(value, epoch=epoch)
        assert stopper.triggered == (epoch == 6)
    assert stopper.best == 0.70 and stopper.best_epoch == 4
    # The run names one best, the kept checkpoint's (0.709 beat 0.70, by less than the delta).
    assert (stopper.kept, stopper.kept_epoch) == (0.709, 6)
    cfg = TrainConfig(epochs=30)
    outcome = early_stop_outcome(stopper, cfg, step=600, epoch=6.0)
    assert outcome.message == (
        "stopped early at epoch 6 of 30: top1 has not improved by more than 0.01 for 2 validations; "
        "the best checkpoint is kept: top-1 70.90% at epoch 6"
    )
    assert {key: outcome.fields[key] for key in ("stopped_epoch", "epochs", "best", "best_epoch")} == {
        "stopped_epoch": 6,
        "epochs": 30,
        "best": 0.709,
        "best_epoch": 6,
    }
    # With a weights' average, the rule watches the top-1 of the weights each checkpoint holds,
    # and the kept one says whose it is (protocol.checkpoint_weights).
    stopper.kept_weights = "raw"
    averaged = early_stop_outcome(stopper, cfg, step=600, epoch=6.0, averaged=True)
    assert averaged.message == (
        "stopped early at epoch 6 of 30: top1 of the checkpoints' weights (raw or EMA) has not improved by more "
        "than 0.01 for 2 validations; the best checkpoint is kept: top-1 70.90% (raw weights) at epoch 6"
    )
    assert averaged.fields["best_weights"] == "raw"
    loss = EarlyStopping("val_loss", patience=1, min_delta=0.0)
    loss.update(1.0, epoch=1)
    loss.update(0.9, epoch=2)
    assert not loss.triggered
    loss.update(0.95, epoch=3)
    assert loss.triggered


def test_it_ends_a_run_whose_validation_accuracy_stops_improving_at_the_right_epoch(tmp_path, gray8):
    # A learning rate too small to move the weights: accuracy is the same at every validation,
    # so with a patience of 2 the run ends after the third validation, at epoch 3 of 10.
    cfg = make_config(
        tmp_path / "run", gray8, epochs=10, solver={"base_lr": 1e-12}, early_stopping_patience=2, val_interval=1
    )
    reporter = ListReporter()
    assert train(cfg, reporter=reporter) == EXIT_DONE
    validations = reporter.of_type("validation")
    assert [round(v["epoch"]) for v in validations] == [1, 2, 3]
    final = reporter.events[-1]
    assert final["state"] == "done" and final["early_stopped"] is True
    # Where it stopped of how many, and one best: the kept checkpoint's, in the metric the rule watched.
    assert (final["stopped_epoch"], final["epochs"], final["best_metric"]) == (3, 10, "top1")
    # Equal values at every validation: the latest of them is kept (issue 33), not the first.
    best = torch.load(best_checkpoint(cfg.run_dir), weights_only=False)
    assert (
        (final["best"], final["best_epoch"])
        == (best["best"], round(best["epoch"], 5))
        == (
            validations[-1]["top1"],
            3,
        )
    )
    assert final["message"] == (
        "stopped early at epoch 3 of 10: top1 has not improved by more than 0 for 2 validations; "
        f"the best checkpoint is kept: top-1 {100 * final['best']:.2f}% at epoch 3"
    )


def test_it_keeps_counting_after_a_resume_from_the_checkpoint(tmp_path, gray8):
    # Two epochs with a patience it cannot reach: the checkpoint holds one stale validation.
    still = {"solver": {"base_lr": 1e-12}, "val_interval": 1}
    first = make_config(tmp_path / "run", gray8, epochs=2, early_stopping_patience=3, **still)
    assert train(first, reporter=ListReporter()) == EXIT_DONE
    state = torch.load(latest_checkpoint(first.run_dir), weights_only=False)["early_stopping"]
    assert state["stale"] == 1 and state["best_epoch"] == 1
    # Resumed for longer: epochs 3 and 4 are its second and third stale validations, so it ends
    # at epoch 4 (counting afresh would have run to epoch 6).
    longer = make_config(tmp_path / "run", gray8, epochs=10, early_stopping_patience=3, **still)
    reporter = ListReporter()
    assert train(longer, reporter=reporter, resume=True) == EXIT_DONE
    assert [round(v["epoch"]) for v in reporter.of_type("validation")] == [3, 4]
    assert reporter.events[-1]["message"].startswith("stopped early at epoch 4 of 10")


def test_it_refuses_early_stopping_without_validations_during_the_run(tmp_path, gray8):
    with pytest.raises(ConfigError, match="set val_interval above 0") as error:
        make_config(tmp_path / "run", gray8, early_stopping_patience=2, val_interval=0)
    assert error.value.field == "early_stopping_patience"
