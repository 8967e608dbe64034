"""What one look at Slurm's queue means for each Slurm run: submit, follow its state, stop it,
and end it when its job ends, with Slurm's reason in plain words.

Slurm, not the workbench, decides where and when a job runs; this module only brings the run's
row in line with what squeue (or sacct) says, and is safe to repeat: every change is a
conditional update, and a look that finds nothing new changes nothing.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from workbench.runs.attempts import gates, outcome
from workbench.runs.attempts.files import AttemptFiles
from workbench.runs.attempts.ingest import (
    IngestLedger,
    final_status,
    ingest_current_attempt,
    ingest_earlier_attempts,
    snapshot,
)
from workbench.runs.executors.slurm import jobs as slurm_jobs
from workbench.runs.lifecycle import run_finish, run_transition
from workbench.runs.models import Run
from workbench.runs.scheduler.quotas import run_held
from workbench.runs.slurm_status import parse_job_name
from workbench.slurm import commands, words
from workbench.slurm.commands import Job
from workbench.workers.processes import GracefulStop, StopClock

log = logging.getLogger(__name__)

# A job squeue does not list yet right after sbatch, or no longer lists: how long to believe it
# may still appear before the run is ended from what its trainer wrote.
FORGOTTEN_GRACE_SECONDS = 30.0


def following() -> list[Run]:
    return list(
        Run.objects.filter(executor=Run.Executor.SLURM, state__in=Run.ACTIVE_STATES).select_related("dataset", "owner")
    )


def reconcile(jobs: dict[str, Job]) -> None:
    """One pass over the Slurm runs against `jobs` (this workbench's jobs that squeue lists)."""
    runs = following()
    known = {run.slurm_job_id for run in runs if run.slurm_job_id}
    missing = [run.slurm_job_id for run in runs if run.slurm_job_id and run.slurm_job_id not in jobs]
    history = commands.accounting(missing) if missing else {}
    for run in runs:
        try:
            reconcile_run(run, jobs.get(run.slurm_job_id) or history.get(run.slurm_job_id))
        except commands.SlurmUnavailable:
            raise
        except Exception:
            log.exception("run %s: could not follow its Slurm job %s", run.pk, run.slurm_job_id)
    cancel_orphans(jobs, known)


def reconcile_run(run: Run, job: Job | None) -> None:
    if not run.has_live_slurm_job:
        if run.slurm_job_id and run.state in (Run.State.RUNNING, Run.State.WAITING):
            # Its job was seen to end, but the run was not ended then (a pass cut short): end it now.
            ended(run, job or Job(run.slurm_job_id, "", run.slurm_state or "UNKNOWN", "", None, "", 0))
        elif run.state in (Run.State.QUEUED, Run.State.INTERRUPTED, Run.State.WAITING):
            submit_when_ready(run)
        return
    if job is None:
        forgotten(run)
        return
    if job.state != run.slurm_state:
        Run.objects.filter(pk=run.pk).update(slurm_state=job.state)
    if job.is_active and restarted(run, job):
        return
    if run.stop_request and job.is_active:
        stop(run, job)
    elif job.state == "PENDING" or job.state.startswith("REQUEUE"):
        pending(run, job)
    elif job.is_running:
        running(run, job)
    elif not job.is_active:
        ended(run, job)


def submit_when_ready(run: Run) -> None:
    if gates.stop_gate(run, from_states=Run.PENDING_STATES):
        return
    dataset = gates.dataset_gate(run)
    if dataset == "building":
        Run.objects.filter(pk=run.pk).update(wait_reason="dataset still building")
    elif dataset == "ready":
        held = run_held(run, now=timezone.now())
        if held is not None:  # a spent quota: it waits, unsubmitted, and says why and until when
            Run.objects.filter(pk=run.pk).update(wait_reason=held[0], estimated_start=held[1])
            return
        slurm_jobs.submit(run)


def restarted(run: Run, job: Job) -> bool:
    """Slurm requeued the job (scontrol requeue, preemption, a failed node): its next start is
    the next attempt. Past RUN_MAX_ATTEMPTS the job is cancelled and the run fails."""
    parsed = parse_job_name(job.name)
    attempt = (parsed[1] if parsed else run.attempt) + job.restarts
    if attempt <= run.attempt:
        return False
    ingest_current_attempt(run)  # the rest of the attempt that was cut short, before the next one writes
    if attempt > settings.RUN_MAX_ATTEMPTS:
        commands.cancel(job.job_id)
        reason = (
            f"Slurm requeued job {job.job_id} {job.restarts} times; attempts are limited to {settings.RUN_MAX_ATTEMPTS}"
        )
        run_finish(run=run, to_state=Run.State.FAILED, reason=reason, from_states=Run.ACTIVE_STATES)
        return True
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(attempt=attempt, launched_attempt=attempt)
        IngestLedger(run, attempt).start()
        run_transition(
            run=run,
            to_state=Run.State.WAITING,
            from_states=(Run.State.RUNNING, Run.State.WAITING),
            reason=f"requeued by Slurm (job {job.job_id}, attempt {attempt}); it resumes from its last checkpoint",
            wait_reason=words.pending_words(job.reason),
        )
    return True


def pending(run: Run, job: Job) -> None:
    reason = f"Slurm job {job.job_id}: {words.pending_words(job.reason)}"
    if run.state == Run.State.RUNNING:
        run_transition(run=run, to_state=Run.State.WAITING, from_states=[Run.State.RUNNING], reason=reason)
    if run.wait_reason != reason or run.estimated_start != job.start:
        Run.objects.filter(pk=run.pk, state__in=Run.PENDING_STATES).update(
            wait_reason=reason, wait_holder=None, estimated_start=job.start
        )


def running(run: Run, job: Job) -> None:
    if run.state == Run.State.RUNNING:
        return
    # What an earlier attempt's trainer wrote after it was last read (it saves a checkpoint and
    # reports its last steps while Slurm ends its job): stored before this attempt's steps, which
    # repeat from that checkpoint, so the series has every step once.
    ingest_earlier_attempts(run, run.attempt)
    fields = {"wait_reason": "", "estimated_start": None}
    if run.started_at is None:
        fields["started_at"] = timezone.now()
    run_transition(
        run=run,
        to_state=Run.State.RUNNING,
        from_states=Run.PENDING_STATES,
        reason=f"started by Slurm on {job.nodes} (job {job.job_id}, attempt {run.attempt})",
        **fields,
    )


class CachedStopClock(StopClock):
    """When the stop of a job was first sent, kept in the cache: each follower pass looks anew,
    and whichever follower holds the lease next must see the same clock."""

    def __init__(self, key: str) -> None:
        self.key = key

    def start(self) -> bool:
        return cache.add(self.key, time.time(), timeout=int(10 * settings.RUN_STOP_GRACE_SECONDS) + 60)

    def elapsed(self) -> float | None:
        started = cache.get(self.key)
        return None if started is None else time.time() - float(started)


def stop(run: Run, job: Job) -> None:
    """Abort or pause: SIGTERM to the trainers, which stop together and save a checkpoint; the
    job then ends by itself. A job that ignores it is cancelled after the grace period, by the
    same rule as a local trainer (workers.processes.GracefulStop)."""
    try:
        if not job.is_running:
            commands.cancel(job.job_id)  # nothing started: nothing to save
            return
        # Job ids start again with a new cluster (or a test's): the run and its attempt make the key unique.
        key = f"workbench:slurm-stop:{run.pk}:{run.attempt}:{run.queued_at.timestamp()}:{job.job_id}"
        graceful = GracefulStop(
            terminate=lambda: commands.signal_job(job.job_id, "TERM"),
            kill=lambda: commands.cancel(job.job_id),
            grace_seconds=settings.RUN_STOP_GRACE_SECONDS,
            name=f"run {run.pk}'s Slurm job {job.job_id}",
            clock=CachedStopClock(key),
        )
        if not graceful.requested:
            log.info("run %s: SIGTERM to Slurm job %s (%s)", run.pk, job.job_id, run.stop_request)
        graceful.request()
        graceful.poll()
    except commands.SlurmError as error:  # the job ended meanwhile: the next pass ends the run
        log.info("run %s: Slurm job %s: %s", run.pk, job.job_id, error)


def forgotten(run: Run) -> None:
    """squeue does not list the job, and there is no accounting to ask: just submitted (wait),
    or ended long ago while nobody followed it (end it from what its trainer wrote)."""
    key = f"workbench:slurm-unlisted:{run.pk}:{run.attempt}:{run.queued_at.timestamp()}:{run.slurm_job_id}"
    cache.add(key, time.time(), timeout=3600)
    if time.time() - float(cache.get(key) or time.time()) < FORGOTTEN_GRACE_SECONDS:
        return
    ended(run, Job(run.slurm_job_id, "", "UNKNOWN", "", None, "", 0))


def ended(run: Run, job: Job) -> None:
    # Seen to end: no longer a live job (a later pass may submit the next attempt).
    Run.objects.filter(pk=run.pk).update(slurm_state=job.state if job.state != "UNKNOWN" else "GONE")
    ingest_current_attempt(run)
    snapshot(run)
    status = final_status(AttemptFiles(run.run_dir, run.attempt))
    ending = outcome.Ending(
        status.get("exit_code"),
        stop_request=run.stop_request,
        message=status.get("message") or "",
        end_state=outcome.LOST if job.state in ("UNKNOWN", "GONE") else job.state,
        where=f"job {job.job_id}",
    )
    outcome.end_attempt(run, outcome.decide(ending), attempt=run.attempt)


def cancel_orphans(jobs: dict[str, Job], known: set[str]) -> None:
    """Jobs of this workbench that no active run follows (a run aborted while its job was being
    submitted, a deleted run, a database restored from a backup) are cancelled; a job that its
    run lost track of (the worker died between sbatch and storing its id) is adopted."""
    for job in jobs.values():
        if not job.is_active or job.job_id in known:
            continue
        parsed = parse_job_name(job.name)
        if parsed is None:
            continue
        run_id, attempt = parsed
        adopted = Run.objects.filter(
            pk=run_id, executor=Run.Executor.SLURM, attempt=attempt, slurm_job_id="", state__in=Run.ACTIVE_STATES
        ).update(slurm_job_id=job.job_id, slurm_state=job.state)
        if not adopted:
            log.warning("cancelling Slurm job %s (%s): no active run follows it", job.job_id, job.name)
            commands.cancel(job.job_id)
