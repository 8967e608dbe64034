"""The run page says what the trainer said of its last validation (issue 33): a detector that has
found nothing read "Best mAP 0.02%" in its header and the reason only in its log."""

from __future__ import annotations

import pytest
from django.urls import reverse

from workbench.runs.lifecycle import run_events_append
from workbench.runs.web.learning import last_validation_notes

pytestmark = pytest.mark.django_db

NOTE = "no box scored above 0.05 on the validation images: the detector has not found anything yet"


def log(line: str, level: str = "warning") -> dict:
    return {"type": "log", "line": line, "level": level}


def test_it_says_the_last_validations_warnings_under_the_header(owner_client, run):
    run_events_append(run_id=run.pk, events=[
        {"type": "metrics", "step": 1, "epoch": 0.5, "loss": 2.0},
        log("the loader waited 40% of the time"),  # a training warning: not the validation's
        {"type": "metrics", "step": 2, "epoch": 1.0, "loss": 1.9},
        log(NOTE), log("validating", level="info"), log(NOTE),  # raw weights, then their average
        {"type": "validation", "step": 2, "epoch": 1.0, "map": 0.0002},
    ])  # fmt: skip
    assert last_validation_notes(run) == [NOTE]
    html = owner_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert f'id="run-validation-notes" role="status">At its last validation: {NOTE}.</p>' in html


def test_it_says_nothing_once_a_later_validation_is_quiet(owner_client, run):
    run_events_append(run_id=run.pk, events=[
        {"type": "metrics", "step": 1, "epoch": 1.0, "loss": 2.0}, log(NOTE),
        {"type": "validation", "step": 1, "epoch": 1.0, "map": 0.0},
        {"type": "metrics", "step": 2, "epoch": 2.0, "loss": 1.0},
        {"type": "validation", "step": 2, "epoch": 2.0, "map": 0.3},
    ])  # fmt: skip
    assert last_validation_notes(run) == []
    assert 'id="run-validation-notes"' not in owner_client.get(reverse("run-detail", args=[run.pk])).content.decode()
