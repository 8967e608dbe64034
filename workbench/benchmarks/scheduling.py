"""Benchmarks as a kind of job of the one queue (workbench/runs/scheduler): they wait in the
same order as runs (priority, users' turns, age), take their GPUs all or nothing on one host, and
say where they stand and when they should start, like a run.

A benchmark holds its GPUs to itself through `Device.reserved_by` (a run holds its own through
`Device.run`); both are set by conditional updates inside one transaction, so no GPU is ever
given twice. Its time budget bounds how long it holds them, and is what the queue's estimates
count on for it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from celery import current_app
from django.db import DatabaseError, transaction
from django.urls import reverse
from django.utils import timezone

from workbench.benchmarks.lifecycle import benchmark_finish, publish_state
from workbench.benchmarks.models import Benchmark
from workbench.projects.quotas import Stretch
from workbench.runs.devices import DeviceRequest
from workbench.runs.scheduler import Job, queue_rows
from workbench.runs.scheduler.jobs import Placement, Shown
from workbench.runs.scheduler.quotas import anonymous_reason
from workbench.workers.inventory import lost_worker
from workbench.workers.models import Device

log = logging.getLogger(__name__)

# The worker's task that measures one benchmark (tasks.run_benchmark), sent by its name: the tasks
# module imports this one, and a name is all a producer of a task needs.
RUN_TASK = "workbench.benchmarks.tasks.run_benchmark"
KIND = "benchmark"
RESERVATION_PREFIX = "benchmark:"
# Past this share of its cells, its own pace says more about its end than its budget does.
PACE_AFTER = 0.05


def benchmark_job(benchmark: Benchmark) -> Job:
    return Job(
        kind=KIND,
        pk=benchmark.pk,
        owner_id=benchmark.owner_id,
        priority=0,  # the users' priority: a benchmark takes its turn among its owner's runs
        queued_at=benchmark.queued_at,
        wants=DeviceRequest.gpus(benchmark.gpus_needed),
        row=benchmark,
        project_id=benchmark.project_id,
    )


def reserving_benchmark(device: Device) -> int | None:
    """The id of the benchmark that holds `device`, if one does."""
    words = device.reserved_by
    held = words.startswith(RESERVATION_PREFIX) and words[len(RESERVATION_PREFIX) :].isdecimal()
    return int(words[len(RESERVATION_PREFIX) :]) if held else None


def reserve(benchmark: Benchmark, placement: Placement) -> bool:
    """Claims the benchmark and its GPUs in one transaction: all or nothing."""
    host, devices = placement.host, placement.devices
    ids = [device.pk for device in devices]
    try:
        with transaction.atomic():
            started = Benchmark.objects.filter(pk=benchmark.pk, state__in=Benchmark.PENDING_STATES).update(
                state=Benchmark.State.RUNNING,
                host=host,
                host_boot_id=host.boot_id,
                started_at=timezone.now(),
                wait_reason="",
                estimated_start=None,
                reason=f"started on {host.hostname}: {', '.join(d.label for d in devices)}",
                # A simulated GPU's numbers are a CPU process's: the page must not pass them off as a GPU's.
                device_labels=[f"{host.hostname}: {d.label}{' (simulated)' if d.simulated else ''}" for d in devices],
            )
            taken = Device.objects.filter(pk__in=ids, kind=Device.Kind.GPU, run__isnull=True, reserved_by="").update(
                reserved_by=benchmark.reservation
            )
            if not started or taken != len(ids):
                transaction.set_rollback(True)
                return False
            benchmark.refresh_from_db()
            publish_state(benchmark)
            transaction.on_commit(lambda: launch(benchmark.pk, host.queue))
        return True
    except DatabaseError as error:
        log.info("benchmark %s yielded to another pass: %s", benchmark.pk, error)
        return False


def launch(benchmark_id: int, queue: str) -> None:
    try:
        current_app.send_task(RUN_TASK, args=[benchmark_id], queue=queue)
    except Exception:
        log.warning("could not send the launch of benchmark %s", benchmark_id)


def seconds_left(benchmark: Benchmark, *, now: datetime) -> float:
    """Its budget, less what it has run; once it has measured a little, its own pace (never past
    the budget: the runner stops it there)."""
    budget = benchmark.time_budget_seconds
    if benchmark.state != Benchmark.State.RUNNING or benchmark.started_at is None:
        return budget
    ran = max((now - benchmark.started_at).total_seconds(), 0.0)
    left = budget - ran
    if benchmark.progress >= PACE_AFTER:
        left = min(left, ran / benchmark.progress - ran)
    return max(left, 0.0)


def queue_position(benchmark: Benchmark) -> tuple[int, int] | None:
    """(its position, the queue's length) while it waits in the one queue; None otherwise."""
    if benchmark.state not in Benchmark.PENDING_STATES:
        return None
    numbered = [(position, job) for position, job in queue_rows() if position is not None]
    mine = next((position for position, job in numbered if job.key == (KIND, benchmark.pk)), None)
    return (mine, len(numbered)) if mine is not None else None


class BenchmarkJobs:
    """The benchmarks' kind, as the scheduler asks it (workbench.runs.scheduler.jobs.JobKind)."""

    name = KIND
    holder_words = "a benchmark"

    def pending(self) -> list[Job]:
        waiting = Benchmark.objects.filter(state__in=Benchmark.PENDING_STATES).select_related("owner")
        return [benchmark_job(benchmark) for benchmark in waiting]

    def holders(self, devices: Iterable[Device]) -> dict[int, Job]:
        held = {device.pk: pk for device in devices if (pk := reserving_benchmark(device)) is not None}
        jobs = {
            b.pk: benchmark_job(b) for b in Benchmark.objects.filter(pk__in=set(held.values())).select_related("owner")
        }
        return {device_pk: jobs[pk] for device_pk, pk in held.items() if pk in jobs}

    def claim(self, job: Job, placement: Placement) -> bool:
        return reserve(job.row, placement)

    def gpu_stretches(self, *, since: datetime, now: datetime) -> list[Stretch]:
        """The running ones', from their start to now (an ended one's is in the quotas' ledger)."""
        held = Benchmark.objects.exclude(started_at=None).filter(finished_at=None)
        return [
            Stretch(b.owner_id, b.project_id, b.started_at, now, len(b.device_labels)) for b in held if b.device_labels
        ]

    def wait(self, job: Job, *, reason: str, estimate: datetime | None, holder: Job | None) -> None:
        benchmark: Benchmark = job.row
        if (
            benchmark.state == Benchmark.State.WAITING
            and benchmark.wait_reason == reason
            and benchmark.estimated_start == estimate
        ):
            return
        updated = Benchmark.objects.filter(pk=benchmark.pk, state__in=Benchmark.PENDING_STATES).update(
            state=Benchmark.State.WAITING, wait_reason=reason, reason=f"waiting: {reason}", estimated_start=estimate
        )
        if updated:
            benchmark.refresh_from_db()
            publish_state(benchmark)

    def not_ready(self, job: Job) -> None:
        """Never: a benchmark's dataset was ready when it was asked for."""

    def seconds_left(self, job: Job, *, now: datetime) -> float:
        return seconds_left(job.row, now=now)

    def reclaim(self) -> int:
        """Running benchmarks of workers that went silent or restarted fail (their cells are kept)."""
        lost = 0
        for benchmark in Benchmark.objects.filter(state=Benchmark.State.RUNNING).select_related("host"):
            why = lost_worker(benchmark.host, benchmark.host_boot_id, watched_at=benchmark.watched_at)
            if why:
                lost += benchmark_finish(
                    benchmark=benchmark, state=Benchmark.State.FAILED, reason=f"{why}; the cells measured are kept"
                )
        return lost

    def describe(self, job: Job, *, viewer) -> Shown:
        benchmark: Benchmark = job.row
        visible = benchmark.is_visible_to(viewer)
        return Shown(
            visible=visible,
            name=f"benchmark: {benchmark.name}" if visible else "another user's benchmark",
            owner=benchmark.owner.username if visible else None,
            url=reverse("benchmark-detail", args=[benchmark.pk]) if visible else None,
            state=benchmark.state,
            requested_devices=job.wants.text,
            # Its words never name a holder: a run in its way is "another run" to everyone.
            wait_reason=benchmark.wait_reason if visible else anonymous_reason(benchmark.wait_reason),
            estimated_start=benchmark.estimated_start,
            progress=benchmark.progress,
        )


BENCHMARKS = BenchmarkJobs()
