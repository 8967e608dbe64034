"""A run's life: its events (one sequence per run), its state transitions and its end.

Every state change is a conditional update (it happens only if the run is still in an expected
state, and given an attempt, still on that attempt), stored with its time in RunTransition, and
announced as a `status` event. How a run ends (`run_finish`) lives here; what an attempt's end
or an interruption means lives in attempts/outcome.py; the executors and the scheduler call them,
never copy them.

When a run gives its devices back, `devices_freed` is sent after commit; the app's receivers
answer with a scheduling pass (a module this low cannot queue tasks: the tasks import it).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.dispatch import Signal
from django.utils import timezone

from trainer import protocol
from workbench.core.groups import group_publish, run_group_name, user_group_name
from workbench.projects.quotas import record_use
from workbench.runs.models import Run, RunEvent, RunTransition
from workbench.runs.series import event_payload
from workbench.workers.models import Device

log = logging.getLogger(__name__)

# Sent (on commit) when a run ended, paused or was interrupted and gave its devices back.
devices_freed = Signal()
# Sent (on commit, robustly: a receiver's error never stops the ingest) when validation events of
# a run were stored, with `run_id` and `events` (the RunEvent rows): a search prunes by them.
validation_stored = Signal()


# ------------------------------------------------------------------------------- events


def _event_fields(event: dict) -> dict:
    data = {key: value for key, value in event.items() if key not in {"type", "time", "step", "epoch"}}
    return {
        "kind": str(event.get("type", protocol.LOG))[:16],
        "step": event.get("step"),
        "epoch": event.get("epoch"),
        "time": float(event.get("time") or time.time()),
        "data": data,
    }


def run_events_append(*, run_id: int, events: list[dict]) -> list[RunEvent]:
    """Stores events with the run's next sequence numbers, then publishes them after commit."""
    if not events:
        return []
    with transaction.atomic():
        # Reserve a block of sequence numbers: the row update serialises concurrent writers.
        Run.objects.filter(pk=run_id).update(last_seq=F("last_seq") + len(events))
        last = Run.objects.values_list("last_seq", flat=True).get(pk=run_id)
        first = last - len(events) + 1
        rows = [RunEvent(run_id=run_id, seq=first + offset, **_event_fields(e)) for offset, e in enumerate(events)]
        RunEvent.objects.bulk_create(rows)
        validations = [row for row in rows if row.kind == protocol.VALIDATION]
        if validations:
            # Heard before they are published: a page that reads the search again on a trial's
            # validation then finds it reported.
            transaction.on_commit(lambda: _announce_validations(run_id, validations))
        transaction.on_commit(lambda: publish_run_events(run_id=run_id, rows=rows))
    return rows


def _announce_validations(run_id: int, rows: list[RunEvent]) -> None:
    for receiver, error in validation_stored.send_robust(sender=Run, run_id=run_id, events=rows):
        if isinstance(error, Exception):
            log.error("run %s: %s failed on its validation", run_id, receiver, exc_info=error)


def publish_run_events(*, run_id: int, rows: Iterable[RunEvent]) -> None:
    # Encoded once here rather than once per viewer: with hundreds of sockets on one run, the
    # consumers' JSON encoding was the largest part of the fan-out's CPU in bench_live_stream.
    text = json.dumps({"type": "events", "events": [event_payload(row) for row in rows]})
    group_publish(run_group_name(run_id), {"type": "run.events", "text": text}, alias=settings.LIVE_CHANNEL_LAYER)


def publish_dashboard(run: Run) -> None:
    payload = {"kind": "run", "id": run.pk, "status": run.state, "percent": round(100 * run.progress, 1)}
    group_publish(user_group_name(run.owner_id), {"type": "dashboard.update", "payload": payload})


# ------------------------------------------------------------------------------- transitions


def run_transition(
    *, run: Run, to_state: str, from_states: Iterable[str], reason: str = "", on_attempt: int | None = None, **fields
) -> bool:
    """Moves the run to `to_state` if it is in one of `from_states` (and, given `on_attempt`, still
    on that attempt: an attempt that no longer owns its run changes nothing); returns whether it did."""
    from_states = list(from_states)
    with transaction.atomic():
        row = Run.objects.select_for_update().filter(pk=run.pk).values_list("state", "attempt").first()
        current, current_attempt = row if row is not None else (None, None)
        if current not in from_states or (on_attempt is not None and current_attempt != on_attempt):
            return False
        Run.objects.filter(pk=run.pk).update(state=to_state, **fields)
        if current == Run.State.RUNNING and to_state != Run.State.RUNNING:
            _record_gpu_use(run.pk)
        RunTransition.objects.create(run_id=run.pk, from_state=current, to_state=to_state, reason=reason)
        status = {"type": protocol.STATUS, "time": time.time(), "state": to_state, "message": reason}
        run_events_append(run_id=run.pk, events=[{**status, "source": "workbench"}])
        run.refresh_from_db()
        transaction.on_commit(lambda: publish_dashboard(run))
    return True


def _record_gpu_use(run_id: int) -> None:
    """The stretch of `running` that ends now, into the quotas' ledger (projects.quotas.record_use),
    charged to the run's owner and the project it is in now; a Slurm run's is an estimate until
    sacct's record of its job replaces it (executors/slurm/accounting.py)."""
    run = Run.objects.get(pk=run_id)
    wanted = run.devices_wanted
    started = run.transitions.filter(to_state=Run.State.RUNNING).order_by("-at").values_list("at", flat=True).first()
    if started is not None and wanted.names_gpus:
        record_use(owner_id=run.owner_id, project_id=run.project_id, job_kind="run", job_id=run.pk, start=started,
                   end=timezone.now(), gpus=wanted.device_count * run.nodes,
                   slurm_job_id=run.slurm_job_id if run.executor == Run.Executor.SLURM else "")  # fmt: skip


def devices_release(*, run: Run) -> int:
    return Device.objects.filter(run=run).update(run=None)


def run_finish(
    *,
    run: Run,
    to_state: str,
    reason: str = "",
    from_states: Iterable[str] = (Run.State.RUNNING,),
    on_attempt: int | None = None,
) -> bool:
    """Ends (or pauses, or interrupts) a run: state change and release of its devices, at once.
    Given `on_attempt`, only while the run is still on that attempt (see run_transition)."""
    with transaction.atomic():
        fields = {"stop_request": "", "trainer_pid": None, "watched_at": None}
        if to_state in Run.FINISHED_STATES:
            fields["finished_at"] = timezone.now()
            fields["eta_seconds"] = None
        if to_state == Run.State.FAILED:
            fields["error"] = reason
        if to_state == Run.State.DONE:
            fields["progress"] = 1.0
        changed = run_transition(
            run=run, to_state=to_state, from_states=from_states, reason=reason, on_attempt=on_attempt, **fields
        )
        if changed:
            devices_release(run=run)
            transaction.on_commit(lambda: devices_freed.send(sender=Run, run_id=run.pk))
    return changed
