"""The study lives in the workbench's database: a new Study object over the same storage, as a
restarted process builds, sees the trials as they were and carries on."""

import threading

import optuna
from django.db import connection

from tests.workbench.runs.conftest import TINY_CONFIG
from workbench.runs.models import Run
from workbench.searches import studies
from workbench.searches.models import Search, Trial
from workbench.searches.services import search_advance, search_create

SPACE = {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1}, "batch_size": {"type": "choice", "values": [4, 8]}}


def _search(owner, dataset, **options) -> Search:
    # On a dataset still building: its trial runs queue and never start (no worker needed).
    dataset.status = "building"
    dataset.save()
    return search_create(
        owner=owner, dataset=dataset, name="s", network="lenet", config=TINY_CONFIG, space=SPACE, gpus="cpu",
        trials=3, parallel=2, sampler="random", seed=7, **options,
    )  # fmt: skip


def test_it_asks_for_trials_up_to_parallel_and_queues_each_as_a_run(transactional_db, owner, dataset):
    search = search_advance(search_id=_search(owner, dataset).pk)
    trials = list(search.trials.order_by("number"))
    assert [trial.number for trial in trials] == [0, 1] and search.trials_claimed == 2
    for trial in trials:
        assert trial.run.state == Run.State.QUEUED
        assert trial.run.config["solver"]["base_lr"] == trial.params["lr"]
        assert trial.run.config["batch_size"] == trial.params["batch_size"]
    assert trials[0].params != trials[1].params  # the seed moves on with each trial
    search_advance(search_id=search.pk)  # a second pass while both still run starts nothing
    assert search.trials.count() == 2


def test_it_resumes_the_study_from_the_database_after_a_restart(transactional_db, owner, dataset):
    search = search_advance(search_id=_search(owner, dataset).pk)
    first = search.trials.get(number=0)
    reported = optuna.trial.Trial(studies.study_for(search), first.study_trial_id)
    reported.report(0.9, 1)

    studies._storages.clear()  # a restarted process: a new engine and a new Study object
    reloaded = optuna.load_study(study_name=search.study_name, storage=studies.storage_url())
    assert [(t.number, t.state, t.params) for t in reloaded.trials] == [
        (trial.number, optuna.trial.TrialState.RUNNING, trial.params) for trial in search.trials.order_by("number")
    ]
    assert reloaded.trials[0].intermediate_values == {1: 0.9}

    # Its run ends: the next pass (any process) tells the study and asks for the last trial.
    Run.objects.filter(pk=first.run_id).update(state=Run.State.FAILED)
    search = search_advance(search_id=search.pk)
    assert search.trials.get(number=0).state == Trial.State.FAILED
    assert search.trials.count() == 3 and search.trials_claimed == 3
    states = [t.state for t in optuna.load_study(study_name=search.study_name, storage=studies.storage_url()).trials]
    assert states == [optuna.trial.TrialState.FAIL, optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.RUNNING]


def test_it_never_starts_the_same_trial_twice_when_passes_race(transactional_db, owner, dataset):
    search = _search(owner, dataset)  # 3 trials, 2 at once; nothing asked yet (no pass ran)
    start = threading.Barrier(3)

    def a_pass():
        start.wait()
        try:
            search_advance(search_id=search.pk)
        finally:
            connection.close()  # each thread's own connection

    passes = [threading.Thread(target=a_pass) for _ in range(3)]
    for thread in passes:
        thread.start()
    for thread in passes:
        thread.join(60)
    search.refresh_from_db()
    numbers = list(search.trials.values_list("number", flat=True))
    assert search.trials_claimed == 2 and sorted(numbers) == [0, 1]
    assert len(set(search.trials.values_list("run_id", flat=True))) == 2
