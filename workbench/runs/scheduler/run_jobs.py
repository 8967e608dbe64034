"""The runs' kind of job: local runs waiting for devices (a search's trials are runs too).

A Slurm run is not here: Slurm's own queue places it (executors/slurm).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from datasets.models import Dataset
from workbench.projects.quotas import Stretch
from workbench.runs.attempts import gates
from workbench.runs.attempts.outcome import interrupt
from workbench.runs.lifecycle import run_transition
from workbench.runs.models import HOLDER_WORDS, Run
from workbench.runs.scheduler.jobs import RUN, Job, Placement, Shown
from workbench.runs.scheduler.quotas import anonymous_reason, run_gpu_stretches
from workbench.workers.inventory import lost_worker
from workbench.workers.models import Device

log = logging.getLogger(__name__)

# The worker's task that runs one attempt (tasks.train_run, the local executor's), sent by its
# name: the tasks module imports this package, and a name is all a producer of a task needs.
TRAIN_TASK = "workbench.runs.tasks.train_run"


class AllocationConflict(Exception):
    """Another pass took a device or the run first; this pass leaves it to them."""


def run_job(run: Run) -> Job:
    return Job(
        kind=RUN,
        pk=run.pk,
        owner_id=run.owner_id,
        priority=run.priority,
        queued_at=run.queued_at,
        wants=run.devices_wanted,
        row=run,
        ready=run.dataset.status == Dataset.Status.READY,
        project_id=run.project_id,
    )


def expected_seconds(run: Run, *, now: datetime) -> float | None:
    """Time `run` still needs: its last reported ETA (a paused or interrupted run keeps it), else
    the length of the last done run like it (network, dataset, devices, epochs, batch), less what
    it has run already. None when nothing says."""
    if run.eta_seconds is not None:
        return run.eta_seconds
    likes = Run.objects.filter(
        state=Run.State.DONE, network=run.network, dataset_id=run.dataset_id, started_at__isnull=False
    ).exclude(pk=run.pk)
    for like in likes.order_by("-finished_at")[:20]:
        same = all(like.config.get(key) == run.config.get(key) for key in ("epochs", "batch_size"))
        if same and like.device_request == run.device_request and like.finished_at:
            ran = (now - run.started_at).total_seconds() if run.state == Run.State.RUNNING and run.started_at else 0
            left = (like.finished_at - like.started_at).total_seconds() - ran
            return left if left > 0 else None
    return None


def allocate(run: Run, placement: Placement) -> bool:
    """Claims the run and its devices in one transaction: all or nothing; False on a conflict."""
    device_ids = sorted(device.pk for device in placement.devices)
    attempt = run.attempt + 1
    try:
        with transaction.atomic():
            # The run first: its row lock makes a second pass wait here, then find it running.
            started = run_transition(
                run=run,
                to_state=Run.State.RUNNING,
                from_states=Run.PENDING_STATES,
                reason=f"started on {placement.host.hostname}: {', '.join(d.label for d in placement.devices)}",
                host=placement.host,
                host_boot_id=placement.host.boot_id,
                attempt=attempt,
                watched_at=None,
                started_at=timezone.now(),
                wait_reason="",
                wait_holder=None,
                estimated_start=None,
            )
            if not started:
                raise AllocationConflict
            taken = Device.objects.filter(pk__in=device_ids, run__isnull=True, reserved_by="").update(run=run)
            if taken != len(device_ids):
                raise AllocationConflict
            transaction.on_commit(lambda: launch(run.pk, attempt, placement.host.queue))
        return True
    except AllocationConflict:
        run.refresh_from_db()
        return False
    except DatabaseError as error:
        # PostgreSQL may break a lock cycle between two passes by failing one: that pass just yields.
        log.info("allocation of run %s yielded to another pass: %s", run.pk, error)
        return False


def launch(run_id: int, attempt: int, queue: str) -> bool:
    """Sends the launch message of one attempt; False when the broker cannot take it (the run
    is placed all the same, and relaunch_unclaimed of a later pass sends it again)."""
    try:
        current_app.send_task(TRAIN_TASK, args=[run_id, attempt], queue=queue)
    except Exception:
        log.warning("could not send the launch of run %s attempt %s; a later pass resends it", run_id, attempt)
        return False
    return True


def relaunch_unclaimed() -> int:
    """Placed runs whose launch no worker claimed (the message was lost: the broker was down when
    it was sent) get it again. After a grace of two worker timeouts, so a message that is merely
    queued is not doubled often; a double is harmless anyway, since a task claims by attempt."""
    grace = 2 * settings.WORKER_TIMEOUT_SECONDS
    cutoff = timezone.now() - timedelta(seconds=grace)
    unclaimed = Run.objects.filter(
        state=Run.State.RUNNING,
        executor=Run.Executor.LOCAL,
        trainer_pid__isnull=True,
        launched_attempt__lt=F("attempt"),
        started_at__lt=cutoff,
    ).select_related("host")
    sent = 0
    for run in unclaimed:
        if run.host is None or lost_worker(run.host, run.host_boot_id):
            continue
        # At most once per grace period and attempt, whichever worker's pass gets here first: a
        # launch that is merely waiting for a free worker thread must not pile up copies.
        placed = f"{run.pk}:{run.attempt}:{run.started_at.timestamp()}"  # this placement, not a reused id
        if cache.add(f"workbench:relaunched:{placed}", True, timeout=grace):
            sent += launch(run.pk, run.attempt, run.host.queue)
    return sent


def set_waiting(run: Run, state: str, reason: str, estimate, holder: Run | None = None) -> None:
    holder_id = holder.pk if holder is not None else None
    if (
        run.state == state
        and run.wait_reason == reason
        and run.wait_holder_id == holder_id
        and run.estimated_start == estimate
    ):
        return
    if run.state != state and run.state != Run.State.INTERRUPTED:
        # The timeline keeps the neutral words: it is read by the run's owner, not the holder's.
        run_transition(run=run, to_state=state, from_states=[run.state], reason=reason)
    Run.objects.filter(pk=run.pk, state__in=Run.PENDING_STATES).update(
        wait_reason=reason, wait_holder=holder, estimated_start=estimate
    )


class RunJobs:
    """The runs' kind, as the scheduler asks it (jobs.JobKind)."""

    name = RUN
    holder_words = HOLDER_WORDS

    def pending(self) -> list[Job]:
        runs = Run.objects.filter(state__in=Run.PENDING_STATES, executor=Run.Executor.LOCAL)
        return [run_job(run) for run in runs.select_related("dataset", "owner")]

    def holders(self, devices: Iterable[Device]) -> dict[int, Job]:
        by_run: dict[int, Job] = {}
        held: dict[int, Job] = {}
        for device in devices:
            if device.run_id:
                if device.run_id not in by_run:
                    by_run[device.run_id] = run_job(device.run)
                held[device.pk] = by_run[device.run_id]
        return held

    def claim(self, job: Job, placement: Placement) -> bool:
        return allocate(job.row, placement)

    def wait(self, job: Job, *, reason: str, estimate: datetime | None, holder: Job | None) -> None:
        holder_run = holder.row if holder is not None and holder.kind == RUN else None
        set_waiting(job.row, Run.State.WAITING, reason, estimate, holder_run)

    def not_ready(self, job: Job) -> None:
        if gates.dataset_gate(job.row) == "building":
            set_waiting(job.row, Run.State.QUEUED, "dataset still building", None)

    def seconds_left(self, job: Job, *, now: datetime) -> float | None:
        return expected_seconds(job.row, now=now)

    def reclaim(self) -> int:
        """Runs whose worker stopped sending heartbeats, or restarted, are interrupted (or failed)."""
        reclaimed = 0
        # A Slurm run has no worker of ours: Slurm keeps it, and its follower (executors/slurm) follows it.
        for run in Run.objects.filter(state=Run.State.RUNNING, executor=Run.Executor.LOCAL).select_related("host"):
            why = lost_worker(run.host, run.host_boot_id, watched_at=run.watched_at)
            if why:
                reclaimed += interrupt(run, why, on_attempt=run.attempt)
        return reclaimed

    def gpu_stretches(self, *, since: datetime, now: datetime) -> list[Stretch]:
        # Only the stretches still open: the ended ones are in the quotas' ledger (lifecycle).
        running = run_gpu_stretches(Run.objects.filter(state=Run.State.RUNNING), since=since, now=now)
        return [stretch for stretch in running if stretch.end == now]

    def describe(self, job: Job, *, viewer) -> Shown:
        run: Run = job.row
        visible = run.is_visible_to(viewer)
        return Shown(
            visible=visible,
            name=run.name if visible else "another user's run",
            owner=run.owner.username if visible else None,
            url=reverse("run-detail", args=[run.pk]) if visible else None,
            state=run.state,
            requested_devices=run.device_request_text(),
            wait_reason=run.wait_reason_for(viewer) if visible else anonymous_reason(run.wait_reason_for(viewer)),
            estimated_start=run.estimated_start,
            progress=run.progress,
            executor=run.executor,
        )


RUNS = RunJobs()
