"""Reads of searches, through the one rule of who may see a row (workbench/core/ownership.py), and
what a search page and its API show: the trials, the best so far, the budget in words."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone

from trainer import protocol
from workbench.core.ownership import row_to_change
from workbench.runs.models import Run, RunEvent
from workbench.runs.scheduler.quotas import run_gpu_stretches
from workbench.runs.selectors import delivered_series
from workbench.searches.models import BestRun, Search, Trial


def searches_visible_to(user) -> QuerySet[Search]:
    return Search.objects.select_related("owner", "dataset").visible_to(user)


def search_for(user, pk: int) -> Search:
    """The search, or Http404 for both a missing one and someone else's."""
    return get_object_or_404(searches_visible_to(user), pk=pk)


def search_to_change(user, pk: int) -> Search:
    """The search to pause, resume, abort, train the best of or share: Http404 as search_for,
    and 403 naming the user's role when they may see it through a project but not change it."""
    return row_to_change(Search.objects.select_related("owner", "dataset"), user, pk, noun="search")


def trials_of(search: Search) -> QuerySet[Trial]:
    return search.trials.select_related("run", "search").order_by("number")


def trial_series(trial: Trial) -> str:
    """The validation key the trial's value is read from: `ema_<objective>` when the validation
    it came from held the weights' average in its checkpoint (runs.selectors.delivered_series). A
    search ranks each trial by the weights it delivers, so averaged and raw values stand side by
    side, and the page and API mark which is which."""
    return protocol.checkpoint_series(trial.search.objective, averaged=trial.value_averaged)


def value_is_averaged(trial: Trial) -> bool:
    """Whether the trial's value is its weights' average's, marked "(EMA)" where it is shown."""
    return trial.value_averaged


def best_trial(search: Search) -> Trial | None:
    """The best complete trial by the objective (the direction decides), None before one completes."""
    order = "-value" if search.direction == Search.Direction.MAXIMIZE else "value"
    return search.trials.filter(state=Trial.State.COMPLETE, value__isnull=False).order_by(order, "number").first()


def final_objective(run: Run, objective: str) -> tuple[float, bool] | None:
    """The objective of the run's last validation that reported it, for the weights that
    validation's checkpoint held (the average's `ema_top1` or the raw `top1`, whichever the
    trainer kept), and whether it is the average's."""
    for data in (
        RunEvent.objects.filter(run=run, kind=protocol.VALIDATION).order_by("-seq").values_list("data", flat=True)
    ):
        series = delivered_series(run, data, objective)
        value = data.get(series)
        if isinstance(value, (int, float)):
            return float(value), series != objective
    return None


def gpu_hours_used(search: Search) -> float:
    """GPU-hours the trials held: each stretch of `running` times the run's GPUs, as the quotas
    count them (runs/scheduler/quotas.py); the CPU counts none."""
    trials = Run.objects.filter(search_trial__search=search)
    stretches = run_gpu_stretches(trials, since=search.created_at - timedelta(days=1), now=timezone.now())
    return sum((stretch.end - stretch.start).total_seconds() * stretch.gpus for stretch in stretches) / 3600.0


def budget_words(search: Search, *, used_gpu_hours: float | None = None) -> str:
    """ "12 of 40 trials, 3.1 of 10 GPU-hours" (trials started; GPU-hours only when capped)."""
    used = gpu_hours_used(search) if used_gpu_hours is None else used_gpu_hours
    words = f"{search.trials_claimed} of {search.max_trials} trials"
    if search.gpu_hours_cap is not None:
        return f"{words}, {used:.1f} of {search.gpu_hours_cap:g} GPU-hours"
    return f"{words}, {used:.1f} GPU-hours"


def possible_actions(search: Search) -> dict[str, bool]:
    """What the search's buttons may do now (services refuse the rest): the page enables these,
    from the server's read of the search, so a button never offers what would answer 409."""
    return {
        "pause": search.state == Search.State.RUNNING,
        "resume": search.state == Search.State.PAUSED,
        "abort": search.state in (Search.State.RUNNING, Search.State.PAUSED),
        "train-best": best_trial(search) is not None,
    }


def latest_best_run(search: Search) -> BestRun | None:
    """The full run "Train the best" queued last, to follow from the search's page."""
    return search.best_runs.select_related("run").first()


def trial_status(trial: Trial) -> str:
    """What a trial is doing, in one word: its own state once it ended; while it is `running`, its
    run's (queued, waiting, paused, interrupted: a trial did not run while its run waited)."""
    if trial.state != Trial.State.RUNNING or trial.run is None:
        return trial.state
    return trial.run.state


def trial_wait_reason(trial: Trial, viewer) -> str:
    """Why the trial's run waits in the queue, as `viewer` may read it; "" when it does not wait."""
    run = trial.run
    if trial.state != Trial.State.RUNNING or run is None or run.state not in Run.PENDING_STATES:
        return ""
    return run.wait_reason_for(viewer) or "not placed yet"
