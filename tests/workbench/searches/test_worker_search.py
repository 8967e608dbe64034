"""A search on the real Celery worker and the real trainer: its trials queue and train as runs,
the pruner stops the bad ones at their first rung with a checkpoint and its reason, and the
search ends with a best that trains as a full run."""

import io
import json
import re

import optuna
import pytest
from django.core.management import call_command

from tests.workbench.runs.conftest import TINY_CONFIG
from workbench.runs.models import Run
from workbench.searches import studies
from workbench.searches.models import Search, Trial
from workbench.searches.selectors import best_trial, budget_words
from workbench.searches.services import search_train_best

pytestmark = [pytest.mark.slow]

# Trials end by early stopping on the val loss: the good learning rate's reaches 0 within a few
# epochs and stops 3 validations later; the bad one's improves a little at every epoch, so it would
# run its 1,000 epochs: only its pruning (at the first rung, epoch 1) ends it. So the test waits on
# the pruner, however fast or loaded the machine.
CONFIG = {
    **TINY_CONFIG, "epochs": 1000, "val_interval": 1, "snapshot_interval": 0, "early_stopping_patience": 3,
    "best_metric": "val_loss",
}  # fmt: skip
# Over lr=choice:0.1,1e-4, seed 24 draws 0.1, 0.1, then 1e-4 twice: the bad trials reach the first
# rung after the good ones have, and ASHA prunes them there.


def test_it_prunes_bad_trials_with_their_reason_and_ends_with_a_best(
    celery_worker, transactional_db, owner, dataset, tmp_path
):
    config = tmp_path / "trial.json"
    config.write_text(json.dumps(CONFIG))
    out = io.StringIO()
    call_command(
        "search", "--dataset", str(dataset.pk), "--network", "lenet", "--config", str(config), "--gpus", "1",
        "--param", "lr=choice:0.1,1e-4", "--trials", "4", "--parallel", "2", "--sampler", "random",
        "--pruner", "asha", "--objective", "val_loss", "--seed", "24", "--wait", "--format", "json", stdout=out,
    )  # fmt: skip
    answer = json.loads(out.getvalue())
    search = Search.objects.get(pk=answer["id"])
    assert answer["best"]["params"] == {"lr": 0.1} and answer["budget"].startswith("4 of 4 trials, ")
    assert search.state == Search.State.DONE, search.reason
    trials = list(search.trials.select_related("run").order_by("number"))
    assert [trial.params["lr"] for trial in trials] == [0.1, 0.1, 1e-4, 1e-4]

    pruned = [trial for trial in trials if trial.state == Trial.State.PRUNED]
    assert pruned, [(t.number, t.state, t.run.state, t.reason) for t in trials]
    for trial in pruned:
        assert trial.params["lr"] == 1e-4 and trial.run.state == Run.State.PRUNED
        assert re.fullmatch(r"val loss [\d.]+ at epoch 1 is worse than [12] of the [23] trials at that rung \(ASHA\)",
                            trial.reason), trial.reason  # fmt: skip
        assert trial.run.transitions.last().reason == trial.reason  # the run's own timeline says why
        assert trial.rung == 1 and trial.run.progress < 0.5  # stopped early, not trained to the end
        assert list((trial.run.run_dir / "checkpoints").glob("step_*.pt"))  # stopped with a checkpoint

    best = best_trial(search)  # the two good trials may tie: the first of them
    assert best.params["lr"] == 0.1 and f"the best is trial {best.number}" in search.reason
    assert budget_words(search).startswith("4 of 4 trials, ")  # GPU-hours: 1 simulated GPU per trial

    states = [
        trial.state for trial in optuna.load_study(study_name=search.study_name, storage=studies.storage()).trials
    ]
    assert states.count(optuna.trial.TrialState.PRUNED) == len(pruned)

    full, _ = search_train_best(search=search, epochs=1)
    assert full.config["solver"]["base_lr"] == 0.1 and full.config["epochs"] == 1 and full.state == Run.State.QUEUED
