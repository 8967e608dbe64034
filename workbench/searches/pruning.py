"""A trial's validations reported to Optuna as they are stored: the pruner decides at each rung,
and a pruned trial's run is asked to stop (called by receivers.py when a trial's run stores
validation events)."""

from __future__ import annotations

import optuna

from workbench.runs import services as run_services
from workbench.runs.models import RunEvent
from workbench.runs.selectors import delivered_series
from workbench.searches import studies
from workbench.searches.models import Search, Trial
from workbench.searches.services import publish_changed


def trial_report(*, run_id: int, events: list[RunEvent]) -> str | None:
    """A trial's run stored validation events: each reports the objective to Optuna at its epoch
    (the rung), and the pruner decides; a pruned trial's run is asked to stop with a checkpoint
    and ends `pruned` with the reason in words. Returns that reason, or None.

    The pruner is given the raw weights' value at every rung, also for a trial that keeps a
    weights' average: the average lags the weights early on, so in a search that varies it an
    averaged trial's early values met raw ones at the same rung and lost for the lag alone. The
    trial's shown value (and its final one, search_advance) stays the weights it delivers."""
    trial = Trial.objects.select_related("search", "run").filter(run_id=run_id, state=Trial.State.RUNNING).first()
    if trial is None or trial.reason:
        return None
    search, objective = trial.search, trial.search.objective
    # (rung, the raw value for the pruner, the value of the weights that validation's checkpoint
    # held, and whether those were the average)
    reports = []
    for event in events:
        raw = event.data.get(objective)
        if event.epoch is None or not isinstance(raw, (int, float)):
            continue
        series = delivered_series(trial.run, event.data, objective)
        averaged = series != objective and isinstance(event.data.get(series), (int, float))
        shown = float(event.data[series]) if averaged else float(raw)
        reports.append((max(1, round(event.epoch)), float(raw), shown, averaged))
    if not reports:
        return None
    study = studies.study_for(search)
    reported = optuna.trial.Trial(study, trial.study_trial_id)
    publish_changed(search.pk)  # its value and rung move on, pruned or not
    for step, value, shown_value, averaged in reports:
        reported.report(value, step)
        Trial.objects.filter(pk=trial.pk).update(value=shown_value, value_averaged=averaged, rung=step)
        if search.pruner == Search.Pruner.NONE or not reported.should_prune():
            continue
        words = studies.prune_words(
            search, study, number=trial.number, value=value, step=step, raw_of_averaged=averaged
        )
        if Trial.objects.filter(pk=trial.pk, state=Trial.State.RUNNING, reason="").update(reason=words):
            run_services.run_prune(run=trial.run, reason=words)
            return words
        return None
    return None
