"""Which events become notices, found from the stored rows at each housekeeping pass (a worker
every few seconds), so a restart or a lost message loses none: each is written once (its key).

- runs that finished or failed in the last hour;
- running runs whose last metric is older than their owner's `stall_minutes`;
- searches that ended in the last hour;
- quotas whose use reached 80 % of their period's GPU-hours (checked once a minute);
- running runs whose GPUs have all read 0 % use since their owner's `idle_minutes` (the workers'
  heartbeats write each device's latest use; when a run's GPUs were first seen idle is kept in the
  cache, so any worker's pass carries it on). Simulated GPUs report no use and are never idle.
"""

from __future__ import annotations

import time
from datetime import timedelta

from django.core.cache import cache
from django.db.models import Max
from django.utils import timezone

from trainer import protocol
from workbench.notices.models import Notice, NoticeSettings
from workbench.notices.services import notify
from workbench.projects.models import Quota
from workbench.projects.quotas import period_start, usage
from workbench.runs.models import Run, RunEvent
from workbench.searches.models import Search
from workbench.workers.models import Device

RECENT = timedelta(hours=1)
QUOTA_CHECK_SECONDS = 60
QUOTA_SHARE = 0.8
_ENDED = {Run.State.DONE: ("run_done", "finished"), Run.State.FAILED: ("run_failed", "failed")}


def notice_pass() -> None:
    now = timezone.now()
    _ended_runs(now)
    _stalled_runs()
    _ended_searches(now)
    _idle_devices()
    if cache.add("notices-quota-check", 1, timeout=QUOTA_CHECK_SECONDS):
        _quotas(now)


def _unnoticed(keys: dict[str, object]) -> dict[str, object]:
    seen = set(Notice.objects.filter(key__in=list(keys)).values_list("key", flat=True))
    return {key: row for key, row in keys.items() if key not in seen}


def _ended_runs(now) -> None:
    ended = Run.objects.filter(state__in=list(_ENDED), finished_at__gte=now - RECENT).select_related("owner")
    for key, run in _unnoticed({f"run:{run.pk}:{run.state}": run for run in ended}).items():
        kind, verb = _ENDED[run.state]
        why = f"\n{run.error}" if run.error else ""
        notify(user=run.owner, kind=kind, key=key, subject=f"Run #{run.pk} {run.name} {verb}",
               body=f"Run #{run.pk} {run.name} ({run.network}) {verb}.{why}\n/runs/{run.pk}/",
               data={"run": run.pk, "state": run.state})  # fmt: skip


def _stalled_runs() -> None:
    running = Run.objects.filter(state=Run.State.RUNNING).select_related("owner")
    last_metric = dict(
        RunEvent.objects.filter(run__in=running, kind__in=[protocol.METRICS, protocol.VALIDATION])
        .values_list("run_id")
        .annotate(last=Max("time"))
    )
    minutes_of = dict(NoticeSettings.objects.filter(user__runs__in=running).values_list("user_id", "stall_minutes"))
    for run in running:
        since = last_metric.get(run.pk) or (run.started_at.timestamp() if run.started_at else time.time())
        minutes = minutes_of.get(run.owner_id, NoticeSettings._meta.get_field("stall_minutes").default)
        if time.time() - since < minutes * 60:
            continue
        key = f"run:{run.pk}:stalled:{run.attempt}"
        if _unnoticed({key: run}):
            notify(user=run.owner, kind="run_stalled", key=key, subject=f"Run #{run.pk} {run.name} has stalled",
                   body=f"Run #{run.pk} {run.name} has reported no metric for {minutes} minutes.\n/runs/{run.pk}/",
                   data={"run": run.pk, "minutes": minutes})  # fmt: skip


def _ended_searches(now) -> None:
    ended = Search.objects.exclude(finished_at=None).filter(finished_at__gte=now - RECENT).select_related("owner")
    for key, search in _unnoticed({f"search:{s.pk}:ended": s for s in ended}).items():
        notify(user=search.owner, kind="search_done", key=key, subject=f"Search #{search.pk} {search.name} ended",
               body=f"Search #{search.pk} {search.name} is {search.state}: {search.reason}\n/searches/{search.pk}/",
               data={"search": search.pk, "state": search.state})  # fmt: skip


def _quotas(now) -> None:
    for quota in Quota.objects.select_related("user", "project"):
        shown = usage(quota, now=now)
        if shown["used_gpu_hours"] < QUOTA_SHARE * quota.gpu_hours or not quota.gpu_hours:
            continue
        # Once per calendar month; a rolling window (whose start moves every moment) once a week.
        period = f"{period_start(quota, now):%Y-%m}" if quota.period == Quota.Period.MONTH else f"{now:%G-W%V}"
        key = f"quota:{quota.pk}:{period}:80"
        people = [quota.user] if quota.user_id else [m.user for m in quota.project.memberships.select_related("user")]
        used, allowed = shown["used_gpu_hours"], quota.gpu_hours
        subject = f"{used:.1f} of {allowed:g} GPU-hours used for {quota.holder_words}"
        body = f"The quota of {quota.holder_words} is at {used / allowed:.0%} {shown['period_words']}."
        for person in people:
            notify(user=person, kind="quota_80", key=key, subject=subject, body=body,
                   data={"quota": quota.pk, "used": used, "allowed": allowed})  # fmt: skip


def _idle_devices() -> None:
    running = Run.objects.filter(state=Run.State.RUNNING).select_related("owner").prefetch_related("devices")
    for run in running:
        gpus = [device for device in run.devices.all() if device.kind == Device.Kind.GPU]
        key = f"notices-idle-since:{run.pk}:{run.attempt}"
        if not gpus or any(device.utilization_percent is None or device.utilization_percent > 0 for device in gpus):
            cache.delete(key)
            continue
        cache.add(key, time.time(), timeout=7 * 24 * 3600)
        chosen = NoticeSettings.objects.filter(user=run.owner).first()
        minutes = chosen.idle_minutes if chosen else NoticeSettings._meta.get_field("idle_minutes").default
        if time.time() - cache.get(key, time.time()) < minutes * 60:
            continue
        notice_key = f"run:{run.pk}:idle:{run.attempt}"
        if _unnoticed({notice_key: run}):
            labels = ", ".join(device.label for device in gpus)
            notify(user=run.owner, kind="devices_idle", key=notice_key,
                   subject=f"Run #{run.pk} {run.name} holds idle GPUs",
                   body=f"Run #{run.pk} {run.name} holds {labels}, at 0 % use for {minutes} minutes.\n/runs/{run.pk}/",
                   data={"run": run.pk, "minutes": minutes})  # fmt: skip
