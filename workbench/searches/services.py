"""What changes searches: create, the pass that moves one on (search_advance), the report of a
trial's validation (pruning.trial_report: prune or go on), pause, resume, abort, train the best.

A search's trials are ordinary runs (workbench.runs.services.run_submit): they queue with
everyone's runs, by the same order and users' turns. Optuna is asked and told outside any Django
transaction: on SQLite its writes go through another connection, which would wait for ours.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import optuna
import redis
from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from datasets.models import Dataset
from trainer.config import TrainConfig
from workbench.audit import services as audit
from workbench.core.errors import RequestError
from workbench.core.groups import group_publish, search_group_name
from workbench.core.numbers import NumberError, bounded_number
from workbench.projects.selectors import project_of_new_work
from workbench.runs import services as run_services
from workbench.runs.models import Run
from workbench.searches import studies
from workbench.searches.models import BestRun, Search, Trial
from workbench.searches.run_checks import check_runs
from workbench.searches.selectors import best_trial, final_objective, gpu_hours_used, trial_series
from workbench.searches.validators import (
    DEFAULT_PARALLEL,
    DEFAULT_TRIALS,
    trial_request,
    validate_budget,
    validate_seed,
    validate_space,
    validate_strategy,
)

log = logging.getLogger(__name__)

# How long a pass may hold its search's lock, and wait for it (a pass asks Optuna a few times).
PASS_LOCK_SECONDS = 60
# An Optuna trial asked this long ago and still without its row was asked by a pass that died.
UNCLAIMED_ASK_SECONDS = 2 * PASS_LOCK_SECONDS


class SearchError(ValueError):
    """A request about a search that cannot be carried out; the message says why."""


# The worker's task that runs one pass (tasks.advance_search), sent by its name as the runs' and
# benchmarks' queues send theirs: the tasks module imports this one.
ADVANCE_TASK = "workbench.searches.tasks.advance_search"


def queue_advance(search_id: int) -> None:
    try:
        current_app.send_task(ADVANCE_TASK, args=[search_id])
    except Exception:
        # No broker right now: every worker heartbeat moves running searches on anyway.
        log.warning("could not queue a pass of search %s", search_id, exc_info=True)


# ------------------------------------------------------------------------------- create


def search_create(
    *,
    owner,
    dataset: Dataset,
    name: str,
    network: str,
    config: dict,
    space: dict,
    gpus: str | int | None = "auto",
    priority: int = 0,
    executor: str | None = None,
    nodes: int | None = 1,
    objective: str | None = None,
    direction: str | None = None,
    sampler: str = Search.Sampler.TPE,
    pruner: str = Search.Pruner.ASHA,
    trials: int = DEFAULT_TRIALS,
    parallel: int = DEFAULT_PARALLEL,
    gpu_hours: float | None = None,
    seed: int | None = None,
) -> Search:
    """Checks the whole request (space, strategy, budget, the base run and every value of the
    space as a run) and creates the search and its Optuna study; its first trials are asked for
    on commit. RequestError names the field."""
    space = validate_space(space)
    objective, direction, sampler, pruner = validate_strategy(
        objective=objective, direction=direction, sampler=sampler, pruner=pruner, space=space, task=dataset.task
    )
    trials, parallel, gpu_hours = validate_budget(trials=trials, parallel=parallel, gpu_hours=gpu_hours)
    seed = validate_seed(seed)
    executor, nodes = check_runs(
        owner=owner, dataset=dataset, network=network, config=config, space=space, gpus=gpus, executor=executor,
        nodes=nodes,
    )  # fmt: skip
    search = Search(
        owner=owner,
        name=(name or f"search over {', '.join(space)} on {dataset.name}")[:200],
        dataset=dataset,
        project=project_of_new_work(owner=owner, dataset=dataset),
        network=network,
        base_request={"config": config, "gpus": gpus, "executor": executor, "nodes": nodes, "priority": priority},
        space=space,
        objective=objective,
        direction=direction,
        sampler=sampler,
        pruner=pruner,
        seed=seed,
        max_trials=trials,
        parallel=parallel,
        gpu_hours_cap=gpu_hours,
        study_name=f"workbench-search-{uuid.uuid4().hex}",
    )
    studies.study_create(search)  # before the row: a study without a search is harmless, not the reverse
    with transaction.atomic():
        search.save()
        transaction.on_commit(lambda: queue_advance(search.pk))
        after = {"dataset": dataset.pk, "network": network, "space": space, "max_trials": search.max_trials}
        audit.record(action="search.create", actor=owner, target=search, after=after)
    return search


# ------------------------------------------------------------------------------- the pass


def search_advance(*, search_id: int) -> Search | None:
    """Moves a search on: tells Optuna of trials whose runs ended, starts new trials while the
    budget and `parallel` allow, and ends the search once its budget is spent and nothing runs.
    Safe to run in several processes at once: each step claims its rows by conditional updates (a
    trial's claim commits with its run and row, _claim_trial), and a pass waits for the search's
    pass in flight; what a pass killed midway left untold to Optuna, the next tells."""
    with _one_pass_at_a_time(search_id):
        search = Search.objects.filter(pk=search_id).first()
        if search is None:
            return None
        before = _fingerprint(search)
        _settle_ended_trials(search)
        _tell_untold_trials(search)
        _start_trials(search)
        _finish_if_spent(search)
        search.refresh_from_db()
        # Every heartbeat passes each running search: its page hears only of real changes.
        if _fingerprint(search) != before:
            publish_changed(search.pk)
        return search


def _fingerprint(search: Search) -> tuple:
    trials = tuple(search.trials.order_by("pk").values_list("pk", "state", "value", "rung", "run_id"))
    return search.state, search.trials_claimed, trials


def publish_changed(search_id: int) -> None:
    """Tells the search's page (its socket, consumers.py) to read the search again, once the
    change is committed: the page reads the API, so what it shows is what is stored."""
    transaction.on_commit(lambda: group_publish(search_group_name(search_id), {"type": "search.changed"}))


@contextmanager
def _one_pass_at_a_time(search_id: int) -> Iterator[None]:
    """Holds the search's pass lock in Redis. The claims alone keep concurrent passes correct, but
    a pass could return while another process was between asking Optuna for a trial and its
    claim: what the caller then read (the CLI's table, the API) missed a trial. Waiting for the
    pass in flight makes a returned pass mean a settled search. No Redis: the claims still hold."""
    lock = client = None
    if settings.REDIS_URL:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=10, socket_connect_timeout=5)
        # The timeout frees the lock of a process that died holding it; a pass takes seconds.
        lock = client.lock(
            f"workbench:search-pass:{search_id}", timeout=PASS_LOCK_SECONDS, blocking_timeout=PASS_LOCK_SECONDS
        )
        try:
            acquired = lock.acquire()
        except redis.RedisError:
            log.warning("search %s: no pass lock (Redis unreachable); the claims alone order this pass", search_id)
            acquired = False
        if not acquired:
            lock = None
    try:
        yield
    finally:
        if lock is not None:
            try:
                lock.release()
            except redis.RedisError:  # expired or Redis gone: the next pass takes it anew
                log.warning("search %s: could not release its pass lock", search_id, exc_info=True)
        if client is not None:
            client.close()


def _trial_end(search: Search, trial: Trial) -> tuple[str, dict[str, Any]]:
    """The ended trial's state and the fields it ends with (value, value_averaged, reason)."""
    run = trial.run
    kept = {"value": trial.value, "value_averaged": trial.value_averaged}
    if run is None:
        return Trial.State.FAILED, {**kept, "reason": "its run was deleted"}
    if run.state == Run.State.DONE:
        final = final_objective(run, search.objective)
        if final is None:
            return Trial.State.FAILED, {"value": None, "reason": f"its run reported no {search.objective}"}
        return Trial.State.COMPLETE, {"value": final[0], "value_averaged": final[1], "reason": ""}
    last = run.transitions.order_by("-at", "-pk").values_list("reason", flat=True).first() or run.state
    if run.state == Run.State.PRUNED:
        return Trial.State.PRUNED, {**kept, "reason": trial.reason or last}
    return Trial.State.FAILED, {**kept, "reason": f"its run {run.state}: {last}"[:300]}


_OPTUNA_STATES = {
    Trial.State.COMPLETE: optuna.trial.TrialState.COMPLETE,
    Trial.State.PRUNED: optuna.trial.TrialState.PRUNED,
    Trial.State.FAILED: optuna.trial.TrialState.FAIL,
}


def _settle_ended_trials(search: Search) -> None:
    running = search.trials.filter(state=Trial.State.RUNNING).select_related("run")
    ended = [trial for trial in running if trial.run is None or trial.run.state in Run.FINISHED_STATES]
    if not ended:
        return
    study = studies.study_for(search)
    for trial in ended:
        state, fields = _trial_end(search, trial)
        # The claim: only the pass whose update moved the row tells Optuna.
        if not Trial.objects.filter(pk=trial.pk, state=Trial.State.RUNNING).update(state=state, **fields):
            continue
        values = fields["value"] if state == Trial.State.COMPLETE else None
        study.tell(trial.number, values, state=_OPTUNA_STATES[state], skip_if_finished=True)


def _start_trials(search: Search) -> None:
    while True:
        search.refresh_from_db()
        if search.state != Search.State.RUNNING or search.trials_claimed >= search.max_trials:
            return
        ended = search.trials.exclude(state=Trial.State.RUNNING).count()
        if search.trials_claimed - ended >= search.parallel:
            return
        if search.gpu_hours_cap is not None and gpu_hours_used(search) >= search.gpu_hours_cap:
            return
        _start_trial(search)  # claimed or not (another pass took the slot), the loop reads the search again


def _start_trial(search: Search) -> Trial | None:
    """Asks Optuna for the next trial's parameters, then claims the search's next trial slot and
    queues the trial's run in one transaction (_claim_trial). None when the slot was taken by
    another pass, or the search stopped running, since `search` was read: nothing is queued then."""
    # The count before this claim: it moves the sampler's seed on (studies.sampler_for).
    claimed = search.trials_claimed
    study = studies.study_for(search)
    asked = study.ask(fixed_distributions=studies.distributions(search.space))
    try:
        trial = _claim_trial(search, claimed=claimed, number=asked.number, params=asked.params,
                             trial_id=studies.trial_id(study, asked.number))  # fmt: skip
    except BaseException:
        # Nothing of the claim was written: the asked trial is nobody's (a kill leaves it to
        # _tell_untold_trials).
        study.tell(asked.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
        raise
    if trial is None or trial.state == Trial.State.FAILED:
        study.tell(asked.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
    return trial


def _claim_trial(search: Search, *, claimed: int, number: int, params: dict, trial_id: int) -> Trial | None:
    """The claim of the slot (search.trials_claimed), the trial's run and its Trial row, written
    together or not at all: a worker killed between a claim and its row lost the trial for good
    (a 10-trial search ended done with 9; one trial at a time, it never ended). The claim's update
    is the first write: it finds a search aborted or paused before it (no run is queued), and it
    holds the search's row, so an abort that comes after waits for this trial's run and aborts it."""
    with transaction.atomic():
        taken = Search.objects.filter(pk=search.pk, state=Search.State.RUNNING, trials_claimed=claimed)
        if not taken.update(trials_claimed=claimed + 1):
            return None
        try:
            with transaction.atomic():  # a refused run is undone alone: the claim and its failed row stay
                # What tells trials apart comes first: a list cuts a long name at its end.
                run = _submit_with(search, params=params, name=f"trial {number} · {search.name}")
        except (RequestError, run_services.RunError) as error:
            # A value inside a range the ends of which passed (rare): the trial fails, the search goes on.
            return Trial.objects.create(
                search=search, number=number, study_trial_id=trial_id, params=params, state=Trial.State.FAILED,
                reason=f"refused: {error}"[:300],
            )  # fmt: skip
        return Trial.objects.create(search=search, number=number, study_trial_id=trial_id, run=run, params=params)


def _tell_untold_trials(search: Search) -> None:
    """Optuna's half of a step a process died in: a trial running in the study whose row has
    ended (killed between _settle_ended_trials' update and its tell), or that has no row at all
    (asked by a pass killed before _claim_trial committed), is told now: its row's end, or failed.
    Left running, the first kept the sampler's "constant liar" on it for good, and a grid's point."""
    running = studies.running_trials(search)
    if not running:
        return
    rows = {row.number: row for row in search.trials.filter(number__in=[trial.number for trial in running])}
    # A pass in flight may not have committed its row yet (passes hold a lock of this age at most).
    asked_before = datetime.now() - timedelta(seconds=UNCLAIMED_ASK_SECONDS)
    study = None
    for untold in running:
        row = rows.get(untold.number)
        if row is not None and row.state == Trial.State.RUNNING:
            continue
        if row is None and (untold.datetime_start is None or untold.datetime_start > asked_before):
            continue
        study = study or studies.study_for(search)
        state = _OPTUNA_STATES[row.state] if row is not None else optuna.trial.TrialState.FAIL
        values = row.value if row is not None and row.state == Trial.State.COMPLETE else None
        study.tell(untold.number, values, state=state, skip_if_finished=True)


def _finish_if_spent(search: Search) -> None:
    search.refresh_from_db()
    if search.state != Search.State.RUNNING or search.trials.filter(state=Trial.State.RUNNING).exists():
        return
    if search.trials_claimed >= search.max_trials:
        reason = f"all {search.max_trials} trials ended"
    elif search.gpu_hours_cap is not None and gpu_hours_used(search) >= search.gpu_hours_cap:
        reason = f"its {search.gpu_hours_cap:g} GPU-hours are spent"
    else:
        return
    best = best_trial(search)
    if best is not None:
        # Named as the trial's run reports it: ema_val_loss when the trial keeps a weights' average.
        reason += f"; the best is trial {best.number} ({trial_series(best)} {best.value:.4g})"
    Search.objects.filter(pk=search.pk, state=Search.State.RUNNING).update(
        state=Search.State.DONE, reason=reason, finished_at=timezone.now()
    )


# ------------------------------------------------------------------------------- user actions


def _trial_runs(search: Search, states) -> list[Run]:
    return list(Run.objects.filter(search_trial__search=search, state__in=states))


def search_pause(*, search: Search) -> Search:
    """No new trial starts, and its trials' runs pause (a running one with its checkpoint)."""
    if not Search.objects.filter(pk=search.pk, state=Search.State.RUNNING).update(state=Search.State.PAUSED):
        raise SearchError(f"search {search.pk} is {search.state}, not running")
    for run in _trial_runs(search, Run.ACTIVE_STATES):
        try:
            run_services.run_pause(run=run)
        except run_services.RunError:
            pass  # it ended or paused meanwhile
    publish_changed(search.pk)
    audit.record(action="search.pause", target=search, before={"state": search.state}, after={"state": "paused"})
    search.refresh_from_db()
    return search


def search_resume(*, search: Search) -> Search:
    if not Search.objects.filter(pk=search.pk, state=Search.State.PAUSED).update(state=Search.State.RUNNING):
        raise SearchError(f"search {search.pk} is {search.state}, not paused")
    for run in _trial_runs(search, [Run.State.PAUSED]):
        try:
            run_services.run_resume(run=run)
        except run_services.RunError:
            pass
    transaction.on_commit(lambda: queue_advance(search.pk))
    publish_changed(search.pk)
    audit.record(action="search.resume", target=search, before={"state": search.state}, after={"state": "running"})
    search.refresh_from_db()
    return search


def search_abort(*, search: Search) -> Search:
    """The search ends; its trials' runs are aborted (their trials fail, Optuna is told by the next pass)."""
    changed = Search.objects.filter(pk=search.pk, state__in=[Search.State.RUNNING, Search.State.PAUSED]).update(
        state=Search.State.ABORTED, reason="aborted by the user", finished_at=timezone.now()
    )
    if not changed:
        raise SearchError(f"search {search.pk} is {search.state} and cannot be aborted")
    for run in _trial_runs(search, [*Run.ACTIVE_STATES, Run.State.PAUSED]):
        try:
            run_services.run_abort(run=run)
        except run_services.RunError:
            pass
    transaction.on_commit(lambda: queue_advance(search.pk))
    publish_changed(search.pk)
    audit.record(action="search.abort", target=search, before={"state": search.state}, after={"state": "aborted"})
    search.refresh_from_db()
    return search


def search_train_best(*, search: Search, epochs: float | None = None, name: str = "") -> tuple[Run, bool]:
    """A full run of the best complete trial's parameters over the search's base request (its
    epochs, or `epochs`), queued as any run; and whether it is new. The same request (this
    search, this best trial, these epochs) while an earlier one's run lives answers that run: a
    second click queued an identical run (issue 33). Once that run ended a request queues anew."""
    best = best_trial(search)
    if best is None:
        raise SearchError(f"search {search.pk} has no complete trial yet")
    key = {"search": search, "trial_number": best.number, "epochs": _full_epochs(search, epochs)}
    live = BestRun.objects.filter(**key).exclude(run__state__in=Run.FINISHED_STATES).select_related("run")
    if (held := live.first()) is not None:  # the common repeat, without waiting on anything
        return held.run, False
    with transaction.atomic():
        # A write that changes nothing, first in the transaction: it holds the search's row (the
        # database's write lock on SQLite) until this commits, so a request racing this one waits
        # here, then finds this run below instead of queuing its own.
        Search.objects.filter(pk=search.pk).update(name=F("name"))
        if (held := live.first()) is not None:
            return held.run, False
        run = _submit_with(search, params=best.params, epochs=epochs,
                           name=name or f"best (trial {best.number}) · {search.name}")  # fmt: skip
        BestRun.objects.create(run=run, **key)
    publish_changed(search.pk)
    after = {"run": run.pk, "trial": best.number, "epochs": key["epochs"]}
    audit.record(action="search.train_best", target=search, after=after)
    return run, True


def _full_epochs(search: Search, epochs) -> float:
    """The full run's epochs, its key: the request's, else the base request's (else the trainer's default)."""
    if epochs is None:
        epochs = (search.base_request.get("config") or {}).get("epochs", TrainConfig.epochs)
    try:
        return float(bounded_number(epochs, field="epochs", low=0, high=math.inf))
    except NumberError as error:
        raise RequestError("epochs", str(error)) from None


def _submit_with(search: Search, *, params: dict, name: str, epochs: float | None = None) -> Run:
    """A run of the search's base request (network, config, devices, priority, executor, nodes)
    with `params` applied: the one mapping for trials and for the best trial's full run."""
    base = search.base_request
    network, config = trial_request(network=search.network, config=base.get("config") or {}, params=params)
    if epochs is not None:
        config = {**config, "epochs": epochs}
    return run_services.run_submit(
        owner=search.owner,
        dataset=search.dataset,
        name=name[:200],
        network=network,
        config=config,
        gpus=base.get("gpus", "auto"),
        priority=base.get("priority") or 0,
        executor=base.get("executor"),
        nodes=base.get("nodes") or 1,
        # The search's project, not the dataset's: a search taken out of a project keeps its trials out.
        project=search.project,
    )
