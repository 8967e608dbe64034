"""Runs one attempt of a run on this worker: starts the trainer, relays its events, ends the run.

The trainer (`python -m trainer train`) runs in a session of its own with CUDA_VISIBLE_DEVICES set
to exactly the granted GPUs, writes JSON-lines events to a file in the run folder (so events
survive the worker) and its log to `trainer.log`. This module tails the events, stores them in
batches, publishes them live, watches for abort and pause requests, and maps the trainer's exit
to the run's final state.

What is stored of each attempt's events file is kept in `events-<attempt>.ingested` beside it,
written inside the transaction that stores the events it counts, so that the next attempt first
stores what a killed worker read too late or never read (the trainer outlives its worker long
enough to write its last metrics and its "stopped" status), each event exactly once.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from trainer import protocol
from workbench.runs import series
from workbench.runs.models import Run, RunEvent
from workbench.runs.services import publish_dashboard, run_events_append, run_finish
from workbench.runs.system_sampler import SystemSampler
from workbench.workers.models import Device
from workbench.workers.processes import start_child

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5
STOP_CHECK_SECONDS = 1.0

# Set when this worker process is on its way out (see heartbeat.worker_is_stopping): Celery waits
# for running tasks before it exits, so each watch stops its trainer (which saves a checkpoint)
# and the run resumes on the worker's next start, instead of holding the host for days.
_worker_exiting = threading.Event()


def stop_trainers_for_worker_exit() -> None:
    if not _worker_exiting.is_set():
        log.warning("this worker is stopping: its trainers stop with a checkpoint and their runs resume later")
        _worker_exiting.set()


def run_config(run: Run) -> dict:
    """The run's trainer config with what the workbench fills in, but the devices (each executor's)."""
    config = copy.deepcopy(run.config)
    config["run_dir"] = str(run.run_dir)
    config["network"] = run.network
    config.setdefault("data", {})["dataset"] = str(run.dataset.path)
    return config


def trainer_config(run: Run, devices: list[Device]) -> tuple[dict, dict[str, str]]:
    """The trainer's config for this attempt and the environment that pins its devices."""
    config = run_config(run)
    gpus = [device for device in devices if device.kind == Device.Kind.GPU]
    if gpus and not any(device.simulated for device in gpus):
        config["devices"] = list(range(len(gpus)))
        visible = ",".join(str(device.index) for device in gpus)
    else:
        # The CPU, or simulated GPUs: one gloo process per simulated GPU, on the CPU.
        config["devices"] = ["cpu"] * max(1, len(gpus))
        visible = ""
    # PCI order makes CUDA's numbering match NVML's, which the inventory and the sampler use.
    return config, {"CUDA_VISIBLE_DEVICES": visible, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


class EventTail:
    """Reads complete JSON lines appended to a file since the last read."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset
        self.partial = b""

    @property
    def consumed(self) -> int:
        """Bytes of complete lines read so far: where the next reader of the file starts."""
        return self.offset - len(self.partial)

    def read(self) -> list[dict]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()
        return list(protocol.read_events(lines))


class EventFilter:
    """Drops metrics and validation steps already stored by an earlier attempt.

    A resumed trainer repeats the steps between its last checkpoint and the interruption; the
    series keeps the first report of each step, so steps stay strictly increasing.
    """

    def __init__(self, run: Run) -> None:
        stored = RunEvent.objects.filter(run=run)
        self.last_step = {
            kind: stored.filter(kind=kind).aggregate(last=Max("step"))["last"] for kind in protocol.STEP_EVENTS
        }

    def keep(self, event: dict) -> bool:
        kind = event.get("type")
        if kind not in self.last_step or event.get("step") is None:
            return True
        last = self.last_step[kind]
        if last is not None and event["step"] <= last:
            return False
        self.last_step[kind] = event["step"]
        return True


class IngestLedger:
    """How far an attempt's events file is stored, kept exactly across a killed worker.

    The record is replaced inside the transaction that stores a batch, before it commits, and
    names the batch's last row: a reader that finds that row stored knows the batch committed
    (start after it), one that does not knows it did not (start before it).
    """

    def __init__(self, run: Run, attempt: int) -> None:
        self.run = run
        self.path = run.run_dir / f"events-{attempt}.ingested"

    def offset(self) -> int | None:
        """Where to go on reading; None for an attempt launched before ledgers were kept."""
        try:
            record = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        if "seq" not in record:  # nothing stored yet
            return record["after"]
        committed = RunEvent.objects.filter(run=self.run, seq=record["seq"], time=record["time"]).exists()
        return record["after"] if committed else record["before"]

    def start(self) -> None:
        self._write({"before": 0, "after": 0})

    def record(self, *, before: int, after: int, last: RunEvent) -> None:
        self._write({"before": before, "after": after, "seq": last.seq, "time": last.time})

    def _write(self, record: dict) -> None:
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(record))
        # No fsync: this guards against a killed process, whose writes the page cache keeps.
        os.replace(temporary, self.path)


def ingest(run: Run, tail: EventTail, ledger: IngestLedger, event_filter: EventFilter) -> list[dict]:
    """Stores the complete lines appended to the tail's file since the last call; returns them."""
    before = tail.consumed
    events = [event for event in tail.read() if event_filter.keep(event)]
    if events:
        with transaction.atomic():
            rows = store(run, events)
            ledger.record(before=before, after=tail.consumed, last=rows[-1])
    return events


def ingest_earlier_attempts(run: Run, attempt: int) -> None:
    """Stores what earlier attempts' trainers wrote and their (killed) workers did not store."""
    event_filter = EventFilter(run)
    for earlier in range(1, attempt):
        path = run.run_dir / f"events-{earlier}.jsonl"
        if not path.exists():
            continue
        ledger = IngestLedger(run, earlier)
        offset = ledger.offset()
        if offset is None:
            continue  # from before ledgers: its worker stored it as far as it could, as before
        events = ingest(run, EventTail(path, offset), ledger, event_filter)
        if events:
            log.info("run %s: stored %d events that attempt %d left behind", run.pk, len(events), earlier)


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
    if run.stop_request:
        final = Run.State.ABORTED if run.stop_request == Run.StopRequest.ABORT else Run.State.PAUSED
        run_finish(run=run, to_state=final, reason=f"{final} before the trainer started")
        return final
    run.run_dir.mkdir(parents=True, exist_ok=True)
    # Before the new trainer writes anything: the series stays in order, steps increasing.
    ingest_earlier_attempts(run, attempt)
    devices = list(run.devices.order_by("kind", "index"))
    config, device_env = trainer_config(run, devices)
    config_path = run.run_dir / f"launch-{attempt}.json"
    config_path.write_text(json.dumps(config, indent=2))
    events_path = run.run_dir / f"events-{attempt}.jsonl"
    argv = [sys.executable, "-m", "trainer", "train", "--config", str(config_path), "--events", str(events_path)]
    if attempt > 1:
        argv.append("--resume")
    ledger = IngestLedger(run, attempt)
    ledger.start()
    with run.log_path.open("ab") as trainer_log:
        trainer_log.write(f"--- attempt {attempt}: {' '.join(argv)}\n".encode())
        trainer_log.flush()
        # Its own process group, so abort reaches every rank and data loader; and it gets
        # SIGTERM (and saves a checkpoint) if this worker dies.
        process = start_child(argv, stdout=trainer_log, env=device_env, own_session=True)
    Run.objects.filter(pk=run.pk).update(trainer_pid=process.pid)
    log.info("run %s attempt %s: trainer pid %s on %s", run.pk, attempt, process.pid, config["devices"])
    # `system` events (the run's own GPUs, the trainer's CPU and memory) every few seconds beside it.
    with SystemSampler(run, settings.SYSTEM_SAMPLE_SECONDS, pid=process.pid):
        code, last_status, stop_request = watch(run, process, EventTail(events_path), ledger)
    # Every series event is stored by now: the snapshot is complete before the run is seen to end.
    snapshot(run)
    return finish(run, code, last_status, stop_request)


def watch(run: Run, process: subprocess.Popen, tail: EventTail, ledger: IngestLedger) -> tuple[int, dict, str]:
    event_filter = EventFilter(run)
    last_status: dict = {}
    stop_request = ""
    signalled_at: float | None = None
    next_stop_check = 0.0
    stored_since_snapshot = 0
    while True:
        code = process.poll()
        events = ingest(run, tail, ledger, event_filter)
        if events:
            stored_since_snapshot += len(events)
            if stored_since_snapshot >= series.SNAPSHOT_ROWS:
                stored_since_snapshot = 0
                snapshot(run)
            last_status = protocol.final_status(events, last_status)
        if code is not None:
            return code, last_status, stop_request
        now = time.monotonic()
        if now >= next_stop_check:
            next_stop_check = now + STOP_CHECK_SECONDS
            state, requested = Run.objects.values_list("state", "stop_request").get(pk=run.pk)
            if state != Run.State.RUNNING and not requested:
                requested = Run.StopRequest.ABORT  # taken from us (worker declared lost): stop
            if (requested or _worker_exiting.is_set()) and signalled_at is None:
                stop_request = requested  # "" when only the worker is exiting: the run resumes
                signalled_at = now
                _kill_group(process, signal.SIGTERM)
            elif signalled_at is not None and now - signalled_at > settings.RUN_STOP_GRACE_SECONDS:
                log.warning("run %s: trainer ignored SIGTERM for %.0f s; killing it", run.pk, now - signalled_at)
                _kill_group(process, signal.SIGKILL)
        time.sleep(POLL_SECONDS)


def snapshot(run: Run) -> None:
    """The run's series snapshot, up to date (see series.leave_snapshot); best effort: the page
    reads the database for whatever a snapshot lacks."""
    try:
        series.leave_snapshot(run)
    except Exception:
        log.warning("run %s: could not update the series snapshot", run.pk, exc_info=True)


def store(run: Run, events: list[dict]) -> list[RunEvent]:
    rows = run_events_append(run_id=run.pk, events=events)
    progress = next((e for e in reversed(events) if e.get("type") == protocol.PROGRESS), None)
    if progress is not None:
        run.progress = min(max(float(progress.get("percent") or 0) / 100.0, 0.0), 1.0)
        run.eta_seconds = progress.get("eta_seconds")
        Run.objects.filter(pk=run.pk).update(progress=run.progress, eta_seconds=run.eta_seconds)
        transaction.on_commit(lambda: publish_dashboard(run))
    return rows


def finish(run: Run, code: int, last_status: dict, stop_request: str) -> str:
    message = last_status.get("message") or ""
    if code == protocol.EXIT_DONE:
        state, reason = Run.State.DONE, message or "finished"
    elif stop_request == Run.StopRequest.ABORT and (code == protocol.EXIT_STOPPED or code < 0):
        state, reason = Run.State.ABORTED, "aborted by the user"
    elif stop_request == Run.StopRequest.PAUSE and (code == protocol.EXIT_STOPPED or code < 0):
        state, reason = Run.State.PAUSED, "paused by the user; resume continues from the checkpoint"
    elif code in protocol.FAILURE_REASONS:
        # Not retried: the same config on the same data would fail the same way.
        state, reason = Run.State.FAILED, message or protocol.FAILURE_REASONS[code]
    else:
        # Stopped by a signal nobody asked for (the worker shutting down, the OOM killer): retry.
        from workbench.runs.scheduler import interrupt

        run.refresh_from_db()
        why = f"the trainer was stopped ({'signal ' + str(-code) if code < 0 else 'exit code ' + str(code)})"
        if _worker_exiting.is_set():
            why = f"its worker stopped; {why}"
        interrupt(run, why)
        return Run.State.INTERRUPTED
    run_finish(run=run, to_state=state, reason=reason)
    return state


def _kill_group(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass
