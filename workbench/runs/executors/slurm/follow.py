"""The follower of the Slurm runs: its own process (`manage.py follow_slurm`), which the run command
starts and restarts beside web and worker while WORKBENCH_SLURM=1. Two threads in it:

- the events thread stores and publishes what each running job's trainer appends to its events
  file on shared storage, every half second: the same ingest as a local run's (sequence
  numbers, the ledger that makes it exactly once, replay and downsampling downstream);
- the control thread asks squeue every SLURM_POLL_SECONDS and brings each run in line with its
  job (reconcile.py): submits, Slurm's pending reason and start estimate, running,
  requeued, stopped, ended; and it replaces the ended jobs' estimated GPU-hours in the quotas'
  ledger with sacct's records of them (accounting.py).

Two threads, so that a controller that hangs (squeue waits out its timeout) does not hold up the
live curves: the events are on shared storage and need no controller. One follower acts at a
time (one per machine may run), whichever holds the lease in the cache; if it dies, another takes over within the lease,
and the ledgers make the handover lose and double nothing. While the controller does not
answer, runs keep their state, the GPUs page says so (controller_status), and the next answer
brings everything up to date.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections

from workbench.runs.attempts.ingest import ingest_current_attempt, snapshot
from workbench.runs.executors.slurm import accounting, reconcile
from workbench.runs.models import Run
from workbench.runs.series import SNAPSHOT_ROWS
from workbench.runs.slurm_status import controller_status, partition_snapshot, record_controller, record_partition
from workbench.slurm import commands

log = logging.getLogger(__name__)

EVENTS_SECONDS = 0.5
LEASE_KEY = "workbench:slurm-follower"
PARTITION_SECONDS = 5.0  # how often the GPUs page's picture of the partition is renewed
_stop = threading.Event()


def lease_seconds() -> int:
    # Outlasts a control pass that waits out a command's timeout, or two followers would act.
    return int(3 * settings.SLURM_COMMAND_TIMEOUT_SECONDS + 3 * settings.SLURM_POLL_SECONDS)


def hold_lease(holder: str) -> bool:
    """Whether `holder` follows now (it took or renewed the lease)."""
    if cache.add(LEASE_KEY, holder, timeout=lease_seconds()):
        return True
    if cache.get(LEASE_KEY) == holder:
        cache.touch(LEASE_KEY, lease_seconds())
        return True
    return False


def _record_partition() -> None:
    if time.time() - partition_snapshot().get("at", 0) < PARTITION_SECONDS:
        return
    nodes = commands.partition_nodes(settings.SLURM_PARTITION)
    jobs = commands.running_jobs(settings.SLURM_PARTITION)
    record_partition({"nodes": [node.__dict__ for node in nodes], "jobs": [list(job) for job in jobs]})


def control_pass() -> None:
    try:
        jobs = commands.jobs(name_prefix=f"{settings.SLURM_JOB_PREFIX}-run")
        reconcile.reconcile(jobs)
        _record_partition()
        accounting.settle_pass()
    except commands.SlurmUnavailable as error:
        if controller_status().get("answers", True):
            log.warning("Slurm: %s; the runs keep their state until it answers", error)
        record_controller(False, str(error))
        return
    record_controller(True)


def events_pass() -> int:
    stored = 0
    for run in Run.objects.filter(executor=Run.Executor.SLURM, state=Run.State.RUNNING).select_related("dataset"):
        before = run.last_seq
        try:
            stored += ingest_current_attempt(run)
        except Exception:
            log.exception("run %s: could not store its events", run.pk)
            continue
        run.refresh_from_db(fields=["last_seq"])
        if before // SNAPSHOT_ROWS != run.last_seq // SNAPSHOT_ROWS:
            snapshot(run)
    return stored


def _loop(holder: str, every: float, step) -> None:
    while not _stop.is_set():
        started = time.monotonic()
        try:
            close_old_connections()
            if hold_lease(holder):
                step()
        except Exception:
            # A database or cache hiccup must not end the follower: the next pass tries again.
            log.exception("Slurm follower pass failed")
        _stop.wait(max(0.05, every - (time.monotonic() - started)))


def request_stop(*_signal_args) -> None:
    """Ends both threads' passes at their next wait; a signal handler as it is (SIGTERM, Ctrl-C)."""
    _stop.set()


def follow_until_stopped(holder: str) -> None:
    """Follows until `request_stop`: the events thread beside this one, the control passes here."""
    events = threading.Thread(target=_loop, args=(holder, EVENTS_SECONDS, events_pass), name="slurm-events")
    events.start()
    log.info("following Slurm partition %s every %.1fs", settings.SLURM_PARTITION, settings.SLURM_POLL_SECONDS)
    _loop(holder, settings.SLURM_POLL_SECONDS, control_pass)
    events.join()
