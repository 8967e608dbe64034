"""The arithmetic of GPU-hour quotas, on stretches of use the queue gathers (runs/quotas.py):
the period a quota counts, what was used in it, whether a job is held, and when it is allowed
again. No queries but the quotas' own: the stretches are given. And the ledger they read, with
the Slurm jobs' estimates that sacct's records replace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Max, Min
from django.utils import timezone

from workbench.projects.models import GpuUsage, Quota

# The start of every wait reason a quota gives: a viewer who may not see the job reads this alone.
OVER_QUOTA = "over quota"


@dataclass(frozen=True)
class Stretch:
    """A job held `gpus` GPUs from `start` to `end` (now, for one still running)."""

    owner_id: int
    project_id: int | None
    start: datetime
    end: datetime
    gpus: int


def period_start(quota: Quota, now: datetime) -> datetime:
    if quota.period == Quota.Period.MONTH:
        moment = now.astimezone(UTC)
        return moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return now - timedelta(days=quota.window_days)


def period_words(quota: Quota) -> str:
    return "this month" if quota.period == Quota.Period.MONTH else f"in the last {quota.window_days} days"


def _counts(quota: Quota, stretch: Stretch) -> bool:
    if quota.project_id is not None:
        return stretch.project_id == quota.project_id
    return stretch.owner_id == quota.user_id


def used_hours(quota: Quota, stretches: Iterable[Stretch], now: datetime) -> float:
    """GPU-hours of `stretches` that count against `quota` inside its period up to `now`."""
    since = period_start(quota, now)
    seconds = 0.0
    for stretch in stretches:
        if _counts(quota, stretch):
            overlap = (min(stretch.end, now) - max(stretch.start, since)).total_seconds()
            seconds += max(overlap, 0.0) * stretch.gpus
    return seconds / 3600.0


def allowed_again_at(quota: Quota, stretches: Iterable[Stretch], now: datetime) -> datetime:
    """When the quota has room again, if nothing more is used: the next month's first moment;
    for a rolling window, the moment enough of the window's use has aged out of it."""
    if quota.period == Quota.Period.MONTH:
        start = period_start(quota, now)
        return (start + timedelta(days=32)).replace(day=1)
    since = period_start(quota, now)
    excess = (used_hours(quota, stretches, now) - quota.gpu_hours) * 3600.0
    # Sweep the window from its start: as time moves on by d, what was used in [since, since + d]
    # leaves it, at the rate of the GPUs held then.
    edges: list[tuple[datetime, int]] = []
    for stretch in stretches:
        if _counts(quota, stretch) and stretch.end > since:
            edges += [(max(stretch.start, since), stretch.gpus), (min(stretch.end, now), -stretch.gpus)]
    edges.sort(key=lambda edge: edge[0])
    aged, rate, moment = 0.0, 0, since
    for at, change in edges:
        step = (at - moment).total_seconds() * rate
        if rate and aged + step > excess:
            return moment + timedelta(days=quota.window_days, seconds=(excess - aged) / rate)
        aged, rate, moment = aged + step, rate + change, at
    return now + timedelta(days=quota.window_days)


def hold(
    *, owner_id: int, project_id: int | None, stretches: list[Stretch], now: datetime
) -> tuple[str, datetime] | None:
    """Why a GPU job of this owner (in this project) may not start now, and when it may: the
    first of its owner's and its project's quotas that is spent; None when both have room."""
    quotas = Quota.objects.filter(user_id=owner_id)
    if project_id is not None:
        quotas = quotas | Quota.objects.filter(project_id=project_id)
    for quota in quotas.select_related("project", "user"):
        used = used_hours(quota, stretches, now)
        if used >= quota.gpu_hours:
            spent = f"{used:.1f} of {quota.gpu_hours:g} GPU-hours {period_words(quota)}"
            return f"{OVER_QUOTA}: {spent} for {quota.holder_words}", allowed_again_at(quota, stretches, now)
    return None


# Where the stretches of use come from: the queue registers its kinds' from the runs app's
# ready() (runs/scheduler/quotas.gpu_stretches), so this app reads them without importing it.
_SOURCES: list[Callable[..., list[Stretch]]] = []


# Called once a quota changes: the queue registers a pass, so held jobs start when they now may.
_ON_CHANGE: list[Callable[[], None]] = []


def record_use(*, owner_id: int, project_id: int | None, job_kind: str, job_id: int, start: datetime, end: datetime,
               gpus: int, slurm_job_id: str = "") -> None:  # fmt: skip
    """Writes one ended stretch of GPU use to the ledger (a job's end, pause or interruption). A
    Slurm job's is an estimate until settle_from_sacct replaces it with the cluster's record."""
    accounted_by = GpuUsage.AccountedBy.ESTIMATE if slurm_job_id else GpuUsage.AccountedBy.WORKBENCH
    if gpus > 0 and end > start:
        GpuUsage.objects.create(user_id=owner_id, project_id_then=project_id, job_kind=job_kind, job_id=job_id,
                                start=start, end=end, gpus=gpus, accounted_by=accounted_by,
                                slurm_job_id=slurm_job_id)  # fmt: skip


@dataclass(frozen=True)
class Allocation:
    """One of sacct's records of a job: it held `gpus` GPUs from `start` to `end` (a job that
    Slurm requeued has one per time it ran); `gpus` None where the cluster does not account GPUs."""

    start: datetime
    end: datetime
    gpus: int | None


def estimated_slurm_jobs(*, limit: int = 200) -> dict[str, tuple[datetime, datetime]]:
    """The Slurm jobs whose use the ledger holds as the follower's estimate, oldest first: when
    the follower first saw each running, and last saw it end."""
    rows = (
        GpuUsage.objects.filter(accounted_by=GpuUsage.AccountedBy.ESTIMATE)
        .values("slurm_job_id")
        .annotate(first_start=Min("start"), last_end=Max("end"))
        .order_by("last_end")
    )
    return {row["slurm_job_id"]: (row["first_start"], row["last_end"]) for row in rows[:limit]}


def settle_from_sacct(*, slurm_job_id: str, allocations: list[Allocation] | None) -> None:
    """Replaces a Slurm job's estimated stretches with sacct's records of it, charged to the same
    owner and project; given None (the cluster keeps no accounting, or never recorded the job),
    the estimate stays as the workbench's own measure."""
    with transaction.atomic():
        estimates = GpuUsage.objects.select_for_update().filter(
            slurm_job_id=slurm_job_id, accounted_by=GpuUsage.AccountedBy.ESTIMATE
        )
        rows = list(estimates)  # read once, every row locked (first() locked one)
        if not rows:  # another follower settled it first
            return
        if allocations is None:
            estimates.update(accounted_by=GpuUsage.AccountedBy.WORKBENCH)
            return
        first, gpus_seen = rows[0], max(row.gpus for row in rows)
        estimates.delete()
        for allocation in allocations:
            gpus = gpus_seen if allocation.gpus is None else allocation.gpus
            if gpus > 0 and allocation.end > allocation.start:
                GpuUsage.objects.create(user_id=first.user_id, project_id_then=first.project_id_then,
                                        job_kind=first.job_kind, job_id=first.job_id, start=allocation.start,
                                        end=allocation.end, gpus=gpus, accounted_by=GpuUsage.AccountedBy.SACCT,
                                        slurm_job_id=slurm_job_id)  # fmt: skip


def ledger_stretches(*, since: datetime) -> list[Stretch]:
    """The ended stretches of the ledger that reach past `since`."""
    rows = GpuUsage.objects.filter(end__gt=since).values_list("user_id", "project_id_then", "start", "end", "gpus")
    return [Stretch(*row) for row in rows]


def register_source(source: Callable[..., list[Stretch]], *, on_change: Callable[[], None]) -> None:
    """The runs app's ready(): where stretches of use come from, and what to do on a change."""
    if source not in _SOURCES:  # ready() may run twice in tests
        _SOURCES.append(source)
    if on_change not in _ON_CHANGE:
        _ON_CHANGE.append(on_change)


def quota_changed() -> None:
    for hook in _ON_CHANGE:
        hook()


def usage(quota: Quota, *, now: datetime | None = None, stretches: list[Stretch] | None = None) -> dict:
    """A quota as the pages and the API show it: used and allowed GPU-hours in its period."""
    now = now or timezone.now()
    if stretches is None:
        stretches = [stretch for source in _SOURCES for stretch in source(now=now)]
    used = used_hours(quota, stretches, now)
    return {
        "for": quota.holder_words,
        "gpu_hours": quota.gpu_hours,
        "used_gpu_hours": round(used, 4),
        "period": quota.period,
        "window_days": quota.window_days if quota.period == Quota.Period.ROLLING else None,
        "period_words": period_words(quota),
        "since": period_start(quota, now).isoformat(),
        "spent": used >= quota.gpu_hours,
        "allowed_again_at": allowed_again_at(quota, stretches, now).isoformat() if used >= quota.gpu_hours else None,
    }
