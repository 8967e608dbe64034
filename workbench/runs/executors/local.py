"""The local executor: one attempt of a run on this worker.

The scheduler placed the run on this host and sent `tasks.train_run`; this module starts the
trainer (`python -m trainer train`) in a session of its own with CUDA_VISIBLE_DEVICES set to
exactly the granted GPUs, follows the events file it writes in the run folder (so events survive
the worker), stops it with grace when an abort or pause is asked for, and ends the attempt by
the outcome table. The trainer starts through the system sampler (trainer/system_samples.py), as
each node of a Slurm job does: its samples of the run's GPUs and the trainer's processes land in
the attempt's `system` file beside the events, and are stored the same way.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import subprocess
import sys
import threading
import time

from django.conf import settings
from django.utils import timezone

from trainer import protocol
from workbench.core.errors import RequestError
from workbench.runs import scheduler, series
from workbench.runs.attempts import gates, outcome
from workbench.runs.attempts.config import granted_device_config, run_config
from workbench.runs.attempts.files import AttemptFiles
from workbench.runs.attempts.ingest import (
    EventFilter,
    IngestLedger,
    SystemOnly,
    ingest,
    ingest_earlier_attempts,
    snapshot,
)
from workbench.runs.devices import DeviceRequest
from workbench.runs.models import Run
from workbench.workers.following import follow_child
from workbench.workers.models import Device
from workbench.workers.processes import EventTail, GracefulStop, start_child

log = logging.getLogger(__name__)

STOP_CHECK_SECONDS = 1.0

# Set when this worker process is on its way out (see heartbeat.worker_is_stopping): Celery waits
# for running tasks before it exits, so each watch stops its trainer (which saves a checkpoint)
# and the run resumes on the worker's next start, instead of holding the host for days.
_worker_exiting = threading.Event()


class LocalExecutor:
    """The workbench's own queue and workers (scheduler.py places, this module runs)."""

    name = Run.Executor.LOCAL
    submitted_words = "submitted"
    has_gpus_for_auto = False  # "auto" asks the online workers whether any has a GPU
    knows_device_memory = True  # the workers' inventory says each GPU's memory

    def check_request(self, *, request: DeviceRequest, nodes: int) -> None:
        if nodes > 1:
            raise RequestError("nodes", "a run over several nodes needs the Slurm executor")

    def holds(self, run: Run) -> bool:
        # A running run's trainer is watched by its worker, which sees the stop request.
        return run.state == Run.State.RUNNING

    def placement_preview(self, *, user, request: DeviceRequest, nodes: int) -> dict:
        return scheduler.placement_preview(user=user, request=request)


def stop_trainers_for_worker_exit() -> None:
    if not _worker_exiting.is_set():
        log.warning("this worker is stopping: its trainers stop with a checkpoint and their runs resume later")
        _worker_exiting.set()


def claim(run_id: int, attempt: int) -> bool:
    """Only the first delivery of a task for this attempt starts a trainer."""
    return bool(
        Run.objects.filter(pk=run_id, state=Run.State.RUNNING, attempt=attempt, launched_attempt__lt=attempt).update(
            launched_attempt=attempt
        )
    )


def run_attempt(*, run_id: int, attempt: int) -> str:
    if not claim(run_id, attempt):
        log.info("run %s attempt %s: already launched or no longer running; nothing to do", run_id, attempt)
        return "duplicate"
    run = Run.objects.select_related("dataset", "host").get(pk=run_id)
    if gates.stop_gate(run, from_states=[Run.State.RUNNING]):
        run.refresh_from_db()
        return run.state
    run.run_dir.mkdir(parents=True, exist_ok=True)
    # Before the new trainer writes anything: the series stays in order, steps increasing.
    ingest_earlier_attempts(run, attempt)
    files = AttemptFiles(run.run_dir, attempt)
    granted = list(run.devices.order_by("kind", "index"))
    devices = granted_device_config(granted)
    files.launch.write_text(json.dumps({**run_config(run), "devices": devices.devices}, indent=2))
    argv = sampler_argv(granted, files) + ["--", sys.executable, "-m", "trainer", "train"]
    argv += ["--config", str(files.launch), "--events", str(files.events)]
    if attempt > 1:
        argv.append("--resume")
    ledger = IngestLedger(run, attempt)
    ledger.start()
    with run.log_path.open("ab") as trainer_log:
        trainer_log.write(f"--- attempt {attempt}: {' '.join(argv)}\n".encode())
        trainer_log.flush()
        # Its own process group, so abort reaches every rank and data loader; and it gets
        # SIGTERM (and saves a checkpoint) if this worker dies.
        process = start_child(argv, stdout=trainer_log, env=devices.env, own_session=True)
    Run.objects.filter(pk=run.pk).update(trainer_pid=process.pid)
    log.info("run %s attempt %s: trainer pid %s on %s", run.pk, attempt, process.pid, devices.devices)
    return follow(run, process, files, ledger)


def sampler_argv(granted: list[Device], files: AttemptFiles) -> list[str]:
    """The system sampler the trainer starts through: the run's own GPUs, by the numbers and names
    the workers' inventory gives them (the host's), sampled every few seconds."""
    gpus = [device for device in granted if device.kind == Device.Kind.GPU]
    argv = [sys.executable, "-m", "trainer.system_samples", "--every", str(settings.SYSTEM_SAMPLE_SECONDS)]
    argv += ["--gpus", str(len(gpus)), "--out", str(files.system), "--node-name", socket.gethostname()]
    if gpus:
        argv += ["--gpu-ids", ",".join(str(gpu.index) for gpu in gpus)]
        argv += [arg for gpu in gpus for arg in ("--gpu-name", gpu.name)]
    if any(gpu.simulated for gpu in gpus):
        argv.append("--simulated")
    return argv


def follow(run: Run, process: subprocess.Popen, files: AttemptFiles, ledger: IngestLedger) -> str:
    """Follows the attempt's trainer to its end, then ends the attempt by the outcome table."""
    ending = watch(run, process, Tails(run, files, ledger))
    # Every series event is stored by now: the snapshot is complete before the run is seen to end.
    snapshot(run)
    decided = outcome.decide(ending)
    if decided.state == Run.State.INTERRUPTED and _worker_exiting.is_set():
        decided = outcome.Outcome(decided.state, f"its worker stopped; {decided.reason}")
    if decided.state == outcome.SUPERSEDED:
        log.warning("run %s attempt %s: the run is no longer this attempt's; trainer stopped", run.pk, files.attempt)
    return outcome.end_attempt(run, decided, attempt=files.attempt)


class Tails:
    """The attempt's two files the watch stores as they grow: the trainer's events and the
    sampler's `system` samples beside them, each with its ledger (exactly once across workers)."""

    def __init__(self, run: Run, files: AttemptFiles, ledger: IngestLedger) -> None:
        self.run = run
        self.attempt = files.attempt
        self.events = (EventTail(files.events), ledger, EventFilter(run))
        self.system = (EventTail(files.system), IngestLedger(run, files.attempt, events=files.system), SystemOnly())
        self.system[1].start()

    def store(self) -> list[dict]:
        """What the trainer wrote since the last call, stored; the samples beside it too."""
        events = ingest(self.run, *self.events)
        ingest(self.run, *self.system)
        return events


def watch(run: Run, process: subprocess.Popen, tails: Tails) -> outcome.Ending:
    """Stores the trainer's events until it exits (workers.following: the one loop, which takes
    the trainer with it if the watch fails); a watch that fails interrupts the run."""
    stop = GracefulStop.of_process(
        process, grace_seconds=settings.RUN_STOP_GRACE_SECONDS, name=f"run {run.pk}'s trainer"
    )
    trainer = TrainerWatch(run, tails, stop)
    try:
        code = follow_child(process, stop=stop, store=trainer.store, look=trainer.look, look_every=STOP_CHECK_SECONDS)
    except BaseException as error:
        with contextlib.suppress(Exception):  # the database may be what failed: then lost-worker ends it
            run.refresh_from_db()
            why = f"its worker stopped watching the trainer ({type(error).__name__})"
            outcome.interrupt(run, why, on_attempt=tails.attempt)
        raise
    return trainer.ending(code)


class TrainerWatch:
    """What the watch of one attempt stores and looks at between the loop's turns."""

    def __init__(self, run: Run, tails: Tails, stop: GracefulStop) -> None:
        self.run, self.tails, self.stop = run, tails, stop
        self.last_status: dict = {}
        self.stop_request = ""
        self.superseded = False
        self.stored_since_snapshot = 0
        self.next_watched = 0.0

    def store(self) -> None:
        events = self.tails.store()
        if events:
            self.stored_since_snapshot += len(events)
            if self.stored_since_snapshot >= series.SNAPSHOT_ROWS:
                self.stored_since_snapshot = 0
                snapshot(self.run)
            self.last_status = protocol.final_status(events, self.last_status)

    def look(self) -> None:
        if self.superseded:
            return
        now = time.monotonic()
        if now >= self.next_watched:
            # Says the attempt still follows its trainer (the run stays ours if the heartbeat is
            # late), and finds out in the same update whether the run is still this attempt's.
            self.next_watched = now + settings.HEARTBEAT_SECONDS
            if not _still_watching(self.run, self.tails.attempt):
                # Not a stop anyone asked for: the run was taken (declared lost while we lived) or
                # ended meanwhile. Its trainer goes at once, without a checkpoint that would land
                # beside the files of the attempt that owns the run now; its outcome changes nothing.
                self.superseded = True
                self.stop.kill()
                return
        requested = Run.objects.values_list("stop_request", flat=True).get(pk=self.run.pk)
        if (requested or _worker_exiting.is_set()) and not self.stop.requested:
            self.stop_request = requested  # "" when only the worker is exiting: the run resumes
            self.stop.request()

    def ending(self, code: int) -> outcome.Ending:
        message = self.last_status.get("message") or ""
        return outcome.Ending(code, stop_request=self.stop_request, message=message, superseded=self.superseded)


def _still_watching(run: Run, attempt: int) -> bool:
    owned = Run.objects.filter(pk=run.pk, state=Run.State.RUNNING, attempt=attempt)
    return bool(owned.update(watched_at=timezone.now()))
