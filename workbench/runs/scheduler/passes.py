"""One scheduling pass over the one queue, and the reads of it (the queue page, the new-run
form's preview).

A pass: each kind reclaims the jobs of lost workers, then the pending jobs of every kind are
walked in queue order (placement.queue_order) and each one whose devices are free starts. Passes
may run at the same time in several processes (every heartbeat, submission and end triggers one):
correctness rests on conditional updates inside one transaction per start, never on there being
a single scheduler.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from datasets.models import Dataset
from workbench.runs.devices import DeviceRequest
from workbench.runs.models import Run, wait_text_for
from workbench.runs.scheduler import run_jobs
from workbench.runs.scheduler.estimates import estimate_starts
from workbench.runs.scheduler.jobs import RUN, Job, kind_of, kinds
from workbench.runs.scheduler.placement import Inventory, plan, queue_order
from workbench.runs.scheduler.quotas import hold_over_quota


def _claim(job: Job, placement) -> bool:
    return kind_of(job).claim(job, placement)


def pending_jobs() -> list[Job]:
    """Every job of every kind that waits for devices of the workbench's own workers."""
    return [job for kind in kinds() for job in kind.pending()]


def schedule() -> dict:
    """One scheduling pass; returns counts for logs and tests."""
    reclaimed = sum(kind.reclaim() for kind in kinds())
    relaunched = run_jobs.relaunch_unclaimed()
    pending = pending_jobs()
    hold_over_quota(pending, now=timezone.now())
    inventory = Inventory.load()
    steps = list(plan(inventory, queue_order(pending), claim=_claim))
    estimates = estimate_starts([step.job for step in steps if step.outcome in ("behind", "wait")], inventory)
    started = 0
    for step in steps:
        job, kind = step.job, kind_of(step.job)
        if step.outcome == "not_ready":
            kind.not_ready(job)
        elif step.outcome == "behind":
            reason = f"behind {step.ahead} run{'s' if step.ahead != 1 else ''} of higher priority"
            kind.wait(job, reason=reason, estimate=estimates[job.key], holder=None)
        elif step.outcome == "wait":
            kind.wait(job, reason=step.reason, estimate=estimates[job.key], holder=step.holder)
        elif step.outcome == "held":
            kind.wait(job, reason=step.reason, estimate=job.held_until, holder=None)
        started += step.outcome == "start"
    return {"reclaimed": reclaimed, "relaunched": relaunched, "started": started, "pending": len(pending) - started}


def placement_preview(*, user, request: DeviceRequest | dict) -> dict:
    """Would a run asking for `request` (resolved: not "auto") start now, or wait, and at which
    queue position? The pass itself, dry, over the queue with this run added."""
    probe_run = Run(
        owner=user,
        name="(this run)",
        device_request=DeviceRequest.of(request).to_dict(),
        priority=0,
        state=Run.State.QUEUED,
        queued_at=timezone.now(),
        dataset=Dataset(status=Dataset.Status.READY),
    )
    probe_run.pk = -1
    probe = run_jobs.run_job(probe_run)
    pending = pending_jobs()
    # As the pass holds them: its owner's spent quota holds the new run too (a project's is known
    # once the run has its dataset, and said in its wait reason then).
    hold_over_quota([*pending, probe], now=timezone.now())
    order = queue_order([*pending, probe])
    step = next(step for step in plan(Inventory.load(), order) if step.job is probe)
    if step.outcome == "start":
        where = ", ".join(device.label for device in step.placement.devices)
        message = f"Starts now on {step.placement.host.hostname}: {where}."
        return {"start_now": True, "position": None, "queue_length": len(order) - 1, "message": message}
    if step.outcome == "behind":
        why = "behind runs of higher priority"
    elif step.outcome == "held":
        why = step.reason
    else:
        holder = step.holder.row if step.holder is not None and step.holder.kind == RUN else None
        why = wait_text_for(step.reason, holder=holder, viewer=user)
    message = f"Waits in the queue at position {step.position} of {len(order)}: {why}."
    return {"start_now": False, "position": step.position, "queue_length": len(order), "message": message}


def queue_rows() -> list[tuple[int | None, Job]]:
    """(position, job) of every waiting job for the queue page and API: the workbench's own queue
    numbered in the order it will be considered, then the runs waiting in Slurm's queue, which
    has its own order (position None: Slurm's reason says why they wait)."""
    on_slurm = Run.objects.filter(state__in=Run.PENDING_STATES, executor=Run.Executor.SLURM)
    slurm_jobs = [run_jobs.run_job(run) for run in on_slurm.select_related("dataset", "owner", "wait_holder")]
    slurm_jobs.sort(key=lambda job: (job.queued_at, job.pk))
    return [*enumerate(queue_order(pending_jobs()), start=1), *((None, job) for job in slurm_jobs)]


@dataclass
class Holding:
    """A running job, where it runs, and when it should give its devices back."""

    job: Job
    where: str
    ends_at: datetime | None  # None: nothing tells yet


def running_rows() -> list[Holding]:
    """What holds devices now, for the queue page ("why 12 minutes?"): every running job of
    every kind, its devices, and its expected end; longest-held first."""
    inventory = Inventory.load()
    # job -> host name -> its devices there ("host: GPU 0, GPU 1": the host named once)
    devices_of: dict[tuple[str, int], dict[str, list[str]]] = {}
    jobs: dict[tuple[str, int], Job] = {}
    for host in inventory.hosts:
        for device in inventory.held[host.pk]:
            job = inventory.holder.get(device.pk)
            if job is not None:
                jobs[job.key] = job
                devices_of.setdefault(job.key, {}).setdefault(host.hostname, []).append(device.label)
    now = timezone.now()
    rows = []
    for key, job in jobs.items():
        left = kind_of(job).seconds_left(job, now=now)
        where = "; ".join(f"{host}: {', '.join(labels)}" for host, labels in devices_of[key].items())
        rows.append(Holding(job, where, None if left is None else now + timedelta(seconds=left)))
    return sorted(rows, key=lambda row: (row.job.row.started_at or now, row.job.kind, row.job.pk))


def queue_for(viewer) -> dict[str, list[dict]]:
    """The queue page's and the API's picture, as `viewer` may see it: what waits, in the order
    it will be considered, and what runs now, where, and until when."""
    waiting = []
    for position, job in queue_rows():
        shown = kind_of(job).describe(job, viewer=viewer)
        waiting.append(
            {
                "position": position,
                "kind": job.kind,
                "id": job.pk if shown.visible else None,
                "priority": job.priority,
                "queued_at": job.queued_at,
                **asdict(shown),
            }
        )
    running = []
    for holding in running_rows():
        job = holding.job
        shown = kind_of(job).describe(job, viewer=viewer)
        running.append(
            {
                "kind": job.kind,
                "id": job.pk if shown.visible else None,
                "where": holding.where,
                "ends_at": holding.ends_at,
                "started_at": job.row.started_at,
                **asdict(shown),
            }
        )
    return {"waiting": waiting, "running": running}
