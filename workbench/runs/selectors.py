"""Reads of runs, with the one rule of who may see one: its owner, and staff.

Every page, API call, websocket and form that shows or takes a run goes through here, so a run
someone may not see answers exactly like one that does not exist (404).
"""

from __future__ import annotations

import time

from django.conf import settings
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from workbench.runs.models import Run
from workbench.runs.slurm_status import controller_status, parse_job_name, partition_snapshot
from workbench.slurm.commands import expand_hostlist


def runs_visible_to(user) -> QuerySet[Run]:
    return Run.objects.select_related("owner", "dataset", "host").visible_to(user)


def run_for(user, pk: int) -> Run:
    """The run, or Http404 for both a missing one and someone else's."""
    return get_object_or_404(runs_visible_to(user), pk=pk)


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
