"""A trial's claim, its run and its row are one step: a pass that dies in between loses no trial,
an aborted search gets no new run, and Optuna hears of every trial a dead pass left untold (no
worker: the trial runs stay queued and are ended by hand)."""

import pytest
from django.db.models.signals import pre_save

from tests.workbench.runs.conftest import TINY_CONFIG
from workbench.runs.lifecycle import run_events_append
from workbench.runs.models import Run
from workbench.searches import services, studies
from workbench.searches.models import Search, Trial
from workbench.searches.services import search_abort, search_advance, search_create

SPACE = {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1}}


class Killed(BaseException):
    """What a kill does to a pass: it stops where it is, and no `except Exception` runs."""


def _search(owner, dataset, *, trials: int, parallel: int) -> Search:
    dataset.status = "building"  # the trial runs queue and never start
    dataset.save()
    return search_create(
        owner=owner, dataset=dataset, name="s", network="lenet", config=TINY_CONFIG, space=SPACE, gpus="cpu",
        trials=trials, parallel=parallel, sampler="random", seed=1,
    )  # fmt: skip


def _end_running_trials(search: Search) -> None:
    """Each running trial's run validates once and ends done, as a worker would have it."""
    for trial in search.trials.filter(state=Trial.State.RUNNING):
        event = {"type": "validation", "step": 3, "epoch": 1.0, "val_loss": 0.5, "top1": 0.5}
        run_events_append(run_id=trial.run_id, events=[event])
        Run.objects.filter(pk=trial.run_id).update(state=Run.State.DONE)


@pytest.mark.parametrize(("trials", "parallel"), [(2, 1), (3, 2)])
def test_it_keeps_every_trial_when_a_pass_dies_before_its_trials_row(
    transactional_db, owner, dataset, trials, parallel
):
    search = _search(owner, dataset, trials=trials, parallel=parallel)

    def die_once(sender, instance, **kwargs):
        pre_save.disconnect(die_once, sender=Trial)
        raise Killed  # between the claim (and the run) and the trial's row

    pre_save.connect(die_once, sender=Trial, weak=False)
    try:
        with pytest.raises(Killed):
            search_advance(search_id=search.pk)
    finally:
        pre_save.disconnect(die_once, sender=Trial)
    assert not Run.objects.filter(state=Run.State.QUEUED).exists()  # the dead step queued nothing

    for _ in range(trials + 1):  # the next passes carry on; one trial at a time was stuck for good
        search = search_advance(search_id=search.pk)
        _end_running_trials(search)
    search = search_advance(search_id=search.pk)
    assert search.state == Search.State.DONE, search.reason
    assert search.trials.filter(state=Trial.State.COMPLETE).count() == trials == search.trials_claimed
    assert search.reason.startswith(f"all {trials} trials ended")
    assert studies.running_trials(search) == []  # Optuna was told of the dead pass's trial too


def test_it_queues_no_run_for_a_search_aborted_while_its_trial_is_made(transactional_db, owner, dataset):
    search = _search(owner, dataset, trials=2, parallel=1)
    read_by_the_pass = Search.objects.get(pk=search.pk)  # running, when the pass read it
    search_abort(search=Search.objects.get(pk=search.pk))  # the user, meanwhile

    assert services._start_trial(read_by_the_pass) is None
    assert not Run.objects.exists() and not Trial.objects.exists()
    search.refresh_from_db()
    assert (search.state, search.trials_claimed) == (Search.State.ABORTED, 0)
    assert studies.running_trials(search) == []  # the trial Optuna gave is told failed


def test_it_tells_optuna_of_the_trials_a_dead_pass_left_untold(transactional_db, owner, dataset, monkeypatch):
    search = search_advance(search_id=_search(owner, dataset, trials=2, parallel=2).pk)
    first, second = search.trials.order_by("number")
    # Killed between a row's end and Optuna's tell, and between an ask and its claim:
    Trial.objects.filter(pk=first.pk).update(state=Trial.State.FAILED, reason="its run failed: killed")
    orphan = studies.study_for(search).ask(fixed_distributions=studies.distributions(search.space))

    search_advance(search_id=search.pk)
    # The ask is young: it may be a pass in flight whose row is about to commit.
    assert sorted(trial.number for trial in studies.running_trials(search)) == [second.number, orphan.number]

    monkeypatch.setattr(services, "UNCLAIMED_ASK_SECONDS", 0)  # as if the lock's time had passed
    search_advance(search_id=search.pk)
    assert [trial.number for trial in studies.running_trials(search)] == [second.number]
    told = {trial.number: trial.state.name for trial in studies.study_for(search).get_trials(deepcopy=False)}
    assert told[first.number] == told[orphan.number] == "FAIL"
