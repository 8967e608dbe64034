"""GPU-hour quotas in the queue (docs/design.md, "GPU-hour quotas"): what each kind of job held,
gathered once per pass, and the jobs it holds back. The arithmetic is workbench/projects/quotas.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db.models import Q, QuerySet

from workbench.projects.models import Quota
from workbench.projects.quotas import OVER_QUOTA, Stretch, hold, ledger_stretches
from workbench.runs.models import Run
from workbench.runs.scheduler.jobs import Job, kinds

# The longest period a quota may count: the stretches gathered reach back this far.
LONGEST_PERIOD = timedelta(days=366)


def run_gpu_stretches(runs: QuerySet[Run], *, since: datetime, now: datetime) -> list[Stretch]:
    """Each stretch of `running` in the runs' transitions (from one to the next; to `now` for a
    run still running) that ends after `since`, times the GPUs the run asked for (times its nodes
    on Slurm). The CPU counts none."""
    stretches = []
    # A waiting run may have run before (resumed, interrupted): its earlier stretches count too.
    recent = runs.filter(Q(finished_at__isnull=True) | Q(finished_at__gte=since))
    for run in recent.prefetch_related("transitions"):
        wanted = run.devices_wanted
        gpus = wanted.device_count * run.nodes if wanted.names_gpus else 0
        if not gpus:
            continue
        started = None
        for transition in run.transitions.all():  # in time order (the model's ordering)
            if started is not None:
                stretches.append(Stretch(run.owner_id, run.project_id, started, transition.at, gpus))
                started = None
            if transition.to_state == Run.State.RUNNING:
                started = transition.at
        if started is not None:
            stretches.append(Stretch(run.owner_id, run.project_id, started, now, gpus))
    return [stretch for stretch in stretches if stretch.end > since]


def gpu_stretches(*, now: datetime) -> list[Stretch]:
    """The ledger's ended stretches and every kind's open ones, for the longest period a quota counts."""
    since = now - LONGEST_PERIOD
    return ledger_stretches(since=since) + [s for kind in kinds() for s in kind.gpu_stretches(since=since, now=now)]


def hold_over_quota(jobs: Iterable[Job], *, now: datetime) -> None:
    """Marks each job that asks for GPUs while its owner's or its project's quota is spent
    (`Job.held`, `Job.held_until`); the others are left as they are."""
    gpu_jobs = [job for job in jobs if job.wants.names_gpus]
    if not gpu_jobs or not Quota.objects.exists():
        return
    stretches = gpu_stretches(now=now)
    for job in gpu_jobs:
        held = hold(owner_id=job.owner_id, project_id=job.project_id, stretches=stretches, now=now)
        if held is not None:
            job.held, job.held_until = held


def run_held(run: Run, *, now: datetime) -> tuple[str, datetime] | None:
    """Why a GPU run of the Slurm executor may not be submitted now (its owner's or project's
    quota is spent), and until when; None when it may. The local queue holds jobs in its pass
    (hold_over_quota); Slurm runs are submitted outside it, so they ask here."""
    if not run.devices_wanted.names_gpus or not Quota.objects.exists():
        return None
    return hold(owner_id=run.owner_id, project_id=run.project_id, stretches=gpu_stretches(now=now), now=now)


def anonymous_reason(reason: str) -> str:
    """A wait reason as a viewer who may not see the job reads it: a quota's words name its
    owner or project and their use, so they read "over quota" alone."""
    return OVER_QUOTA if reason.startswith(OVER_QUOTA) else reason
