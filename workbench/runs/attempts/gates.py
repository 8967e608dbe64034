"""What must hold before an attempt starts, checked the same way by every executor."""

from __future__ import annotations

from collections.abc import Iterable

from datasets.models import Dataset
from workbench.runs.attempts.outcome import stop_words
from workbench.runs.lifecycle import run_finish
from workbench.runs.models import Run


def stop_gate(run: Run, *, from_states: Iterable[str]) -> bool:
    """A stop asked for before the trainer started ends the run here; True when it did."""
    if not run.stop_request:
        return False
    final, words = stop_words(run)
    run_finish(run=run, to_state=final, reason=f"{words} (before the trainer started)", from_states=from_states)
    return True


def dataset_gate(run: Run) -> str:
    """ "ready", "building" (the run waits) or "failed" (the run failed here, with the dataset's words)."""
    dataset = run.dataset
    if dataset.status == Dataset.Status.READY:
        return "ready"
    if dataset.status in (Dataset.Status.FAILED, Dataset.Status.CANCELLED):
        reason = f"dataset {dataset.name!r} {dataset.status}: {dataset.error or 'no details'}".strip()
        run_finish(run=run, to_state=Run.State.FAILED, reason=reason, from_states=Run.PENDING_STATES)
        return "failed"
    return "building"
