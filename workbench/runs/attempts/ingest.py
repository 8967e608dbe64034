"""An attempt's events file, stored exactly once, whoever follows it (a local worker's watch, the
Slurm follower, the next attempt catching up on a killed worker's last lines).

What is stored of each attempt's events file is kept in its ledger (`events-<attempt>.ingested`),
written inside the transaction that stores the events it counts, so that whoever reads next
starts where the last committed batch ended: each event is stored exactly once.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from django.db import transaction
from django.db.models import Max

from trainer import protocol
from workbench.runs import series
from workbench.runs.attempts.files import AttemptFiles
from workbench.runs.lifecycle import publish_dashboard, run_events_append
from workbench.runs.models import Run, RunEvent
from workbench.workers.processes import EventTail

log = logging.getLogger(__name__)


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


class SystemOnly:
    """Keeps the `system` samples of a node's sampler file (its only writer is the sampler)."""

    def keep(self, event: dict) -> bool:
        return event.get("type") == protocol.SYSTEM


class IngestLedger:
    """How far an attempt's events file is stored, kept exactly across a killed worker.

    The record is replaced inside the transaction that stores a batch, before it commits, and
    names the batch's last row: a reader that finds that row stored knows the batch committed
    (start after it), one that does not knows it did not (start before it).
    """

    def __init__(self, run: Run, attempt: int, *, events: Path | None = None) -> None:
        """The ledger of the attempt's events file, or of another file of it (`events`: a node's
        system samples)."""
        self.run = run
        self.path = (
            events.with_name(protocol.ingested_name(events.name))
            if events
            else AttemptFiles(run.run_dir, attempt).ledger
        )

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
    """Stores what earlier attempts' trainers and samplers wrote and their (killed) workers did not store."""
    event_filter = EventFilter(run)
    for earlier in range(1, attempt):
        files = AttemptFiles(run.run_dir, earlier)
        sources = [(files.events, IngestLedger(run, earlier), event_filter)]
        sources += [(path, IngestLedger(run, earlier, events=path), SystemOnly()) for path in files.system_events()]
        for path, ledger, keep in sources:
            offset = ledger.offset() if path.exists() else None
            if offset is None:
                continue  # none, or from before ledgers: its worker stored it as far as it could
            events = ingest(run, EventTail(path, offset), ledger, keep)
            if events:
                log.info(
                    "run %s: stored %d lines of %s that attempt %d left behind", run.pk, len(events), path.name, earlier
                )


def ingest_current_attempt(run: Run) -> int:
    """Stores what the run's current attempt wrote since the last look, for a follower that does
    not hold the files open (the Slurm follower): the events file and each node's system samples.
    The run's row is locked while their ledgers are read and moved, so two followers never store
    a line twice."""
    files = AttemptFiles(run.run_dir, run.attempt)
    sources = [(files.events, EventFilter(run))] if files.events.exists() else []
    sources += [(path, SystemOnly()) for path in files.system_events()]
    if not sources:
        return 0
    stored = 0
    with transaction.atomic():
        locked = Run.objects.select_for_update().filter(pk=run.pk).values_list("attempt", flat=True).first()
        if locked != run.attempt:
            return 0
        for path, event_filter in sources:
            ledger = IngestLedger(run, run.attempt, events=path)
            offset = ledger.offset()
            if offset is None:
                ledger.start()
                offset = 0
            stored += len(ingest(run, EventTail(path, offset), ledger, event_filter))
    return stored


def latest_position(run: Run) -> dict:
    """Step, epoch and images seen of the run's latest metrics, so system points share the x axes."""
    row = (
        RunEvent.objects.filter(run_id=run.pk, kind=protocol.METRICS)
        .order_by("-seq")
        .values_list("step", "epoch", "data")
        .first()
    )
    if row is None:
        # Before the first metric the run is at its start: samples of a short run, or of any
        # run's first seconds, then still have a place on every x axis (step, epoch, images).
        return {"step": 0, "epoch": 0.0, "images_seen": 0}
    step, epoch, data = row
    return {"step": step, "epoch": epoch, "images_seen": data.get("images_seen")}


def placed(run: Run, events: list[dict]) -> list[dict]:
    """System samples written beside the trainer know no step: each gets the latest metrics' position."""
    position = None
    for index, event in enumerate(events):
        if event.get("type") == protocol.METRICS:
            position = {"step": event.get("step"), "epoch": event.get("epoch"), "images_seen": event.get("images_seen")}
        elif event.get("type") == protocol.SYSTEM and "step" not in event:
            position = position or latest_position(run)
            events[index] = {**event, **position}
    return events


def store(run: Run, events: list[dict]) -> list[RunEvent]:
    rows = run_events_append(run_id=run.pk, events=placed(run, events))
    progress = next((e for e in reversed(events) if e.get("type") == protocol.PROGRESS), None)
    if progress is not None:
        run.progress = min(max(float(progress.get("percent") or 0) / 100.0, 0.0), 1.0)
        run.eta_seconds = progress.get("eta_seconds")
        Run.objects.filter(pk=run.pk).update(progress=run.progress, eta_seconds=run.eta_seconds)
        transaction.on_commit(lambda: publish_dashboard(run))
    return rows


def snapshot(run: Run) -> None:
    """The run's series snapshot, up to date (see series.leave_snapshot); best effort: the page
    reads the database for whatever a snapshot lacks."""
    try:
        series.leave_snapshot(run)
    except Exception:
        log.warning("run %s: could not update the series snapshot", run.pk, exc_info=True)


def final_status(files: AttemptFiles) -> dict:
    """The attempt's final status: the first node's, unless another node failed first (the rank
    that died names the cause; the others only lose their peer)."""
    statuses = []
    for path in [files.events, *files.node_events()]:
        try:
            lines = path.read_bytes().splitlines()
        except FileNotFoundError:
            continue
        status = protocol.final_status(protocol.read_events(lines))
        if status:
            statuses.append(status)
    if not statuses:
        return {}
    failures = [s for s in statuses if s.get("exit_code") not in (*protocol.EXIT_OK, None)]
    return min(failures, key=lambda s: s.get("time") or 0) if failures else statuses[0]
