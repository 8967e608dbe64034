"""Reads of runs, through the one rule of who may see a row (workbench/core/ownership.py).

Every page, API call, websocket and form that shows or takes a run goes through here, so a run
someone may not see answers exactly like one that does not exist (404).
"""

from __future__ import annotations

import time

from django.conf import settings
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from trainer import protocol
from trainer.early_stop import improves
from trainer.recipes import averages_weights
from workbench.core.ownership import row_to_change
from workbench.runs.models import Run
from workbench.runs.slurm_status import controller_status, parse_job_name, partition_snapshot
from workbench.slurm.commands import expand_hostlist


def runs_visible_to(user) -> QuerySet[Run]:
    return Run.objects.select_related("owner", "dataset", "dataset_version", "host").visible_to(user)


def run_for(user, pk: int) -> Run:
    """The run, or Http404 for both a missing one and someone else's."""
    return get_object_or_404(runs_visible_to(user), pk=pk)


def run_to_change(user, pk: int) -> Run:
    """The run to pause, resume, abort, edit, share or delete: Http404 as run_for, and 403 naming
    the user's role when they may see it through a project but not change it."""
    return row_to_change(Run.objects.select_related("owner", "dataset", "host"), user, pk, noun="run")


# ----------------------------------------------------------------------------- the best checkpoint


def best_metric_of(run: Run) -> str:
    """The metric the run's best checkpoint follows: its config's, and on a detection or
    segmentation dataset the classification default means the task's first (trainer.protocol.
    best_metric_of, the trainer's rule)."""
    metric = (run.config or {}).get("best_metric") or "top1"
    try:
        return protocol.best_metric_of(run.dataset.task or protocol.CLASSIFICATION, metric)
    except ValueError:
        return metric  # a run stored before the rule was checked at submission: shown as it asked


def weights_rule(run: Run) -> tuple[bool, str | None]:
    """Whether the run keeps a weights' average, and the weights its config forces every
    checkpoint to hold (`best_weights`; None: the better of the two at each validation,
    trainer.protocol.checkpoint_weights)."""
    config = run.config or {}
    averaged = averages_weights(config)
    return averaged, config.get("best_weights") if averaged else None


def held_at(data: dict, *, averaged: bool) -> str:
    """RAW or AVERAGE: the weights the checkpoint of the validation event `data` holds, as its
    trainer recorded them (protocol.checkpoint_weights); an event of a run with an average
    written before issue 33 has no record, and its checkpoints held the average."""
    recorded = data.get("weights")
    if recorded in protocol.BEST_WEIGHTS:
        return recorded
    return protocol.AVERAGE if averaged else protocol.RAW


def delivered_series(run: Run, data: dict, metric: str) -> str:
    """The key of `metric` in the validation event `data` for the weights that validation's
    checkpoint holds (`held_at`): `ema_top1` where it held the average, `top1` where the raw
    weights, as the trainer picked them. What a run delivers at that validation."""
    averaged, _ = weights_rule(run)
    return protocol.checkpoint_series(metric, averaged=held_at(data, averaged=averaged) == protocol.AVERAGE)


def run_best(run: Run) -> dict | None:
    """The best checkpoint's validation: {metric, series, averaged, weights, weights_words, value,
    epoch, step}; None before the first. Each validation offers the weights its checkpoint holds
    (`held_at`: the better of the raw weights and their average, or the config's choice), and the
    trainer's rule (trainer.early_stop.improves) keeps the latest at least as good as every one
    before it, which is also the one an early-stopped run names as kept. The run page, its API
    and the runs list read "best" here, so all of them say the same, and whose weights it is."""
    metric = best_metric_of(run)
    averaged, _ = weights_rule(run)
    found = None
    rows = run.events.filter(kind=protocol.VALIDATION).order_by("seq")
    columns = (f"data__{metric}", f"data__{protocol.EMA_PREFIX}{metric}", "data__weights", "epoch", "step")
    for raw, average, recorded, epoch, step in rows.values_list(*columns):
        weights = held_at({"weights": recorded}, averaged=averaged)
        value = average if weights == protocol.AVERAGE else raw
        if isinstance(value, int | float) and improves(metric, value, found[0] if found else None):
            found = (value, epoch, step, weights)
    if found is None:
        return None
    value, epoch, step, weights = found
    return {
        "metric": metric,
        "series": protocol.checkpoint_series(metric, averaged=weights == protocol.AVERAGE),
        "averaged": weights == protocol.AVERAGE,
        "weights": weights,
        # How the pages name them ("best (EMA)", "best (raw weights)"); None without an average.
        "weights_words": protocol.WEIGHTS_WORDS[weights] if averaged else None,
        "value": value,
        "epoch": epoch,
        "step": step,
    }


def slurm_partition_for(user) -> dict | None:
    """The Slurm partition as `user` may see it on the GPUs page (None when Slurm is off): each
    node's GPUs and who holds them, a run of theirs by name, anyone else's as "another user's run",
    a job that is not the workbench's only by its number; and whether the controller answers."""
    if not settings.SLURM_ENABLED:
        return None
    snapshot, status = partition_snapshot(), controller_status()
    visible = set(runs_visible_to(user).filter(executor=Run.Executor.SLURM).values_list("pk", flat=True))
    holders: dict[str, list[str]] = {}
    for job_id, name, _user, nodelist in snapshot.get("jobs", []):
        parsed = parse_job_name(name)
        if parsed is None:
            who = f"Slurm job {job_id} (not the workbench's)"
        elif parsed[0] in visible:
            who = f"run #{parsed[0]} (Slurm job {job_id})"
        else:
            who = "another user's run"
        for node in expand_hostlist(nodelist):
            holders.setdefault(node, []).append(who)
    nodes = [{**node, "holders": holders.get(node["name"], [])} for node in snapshot.get("nodes", [])]
    return {
        "partition": settings.SLURM_PARTITION,
        "answers": status.get("answers"),
        "message": status.get("message", ""),
        "seconds_ago": round(time.time() - snapshot["at"]) if snapshot else None,
        "nodes": nodes,
    }
