"""A label check end to end from the command line: a real worker trains its fold runs (LeNet on
the CPU), each writes its held-out predictions, and what the check doubts are the flipped labels
(the bench measures how many it finds: bench/bench_label_errors.py)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from tests.workbench.labelchecks.conftest import FLIPPED
from workbench.labelchecks.models import LabelCheck

pytestmark = [pytest.mark.slow]


def test_it_checks_the_labels_with_real_fold_runs_and_finds_the_flipped_ones(
    celery_worker, transactional_db, owner, noisy
):
    out = StringIO()
    call_command(
        "check_labels", noisy.pk, "--as", owner.username, "--folds", "3", "--epochs", "40", "--batch-size", "8",
        "--gpus", "cpu", "--wait", "--top", "5", stdout=out, stderr=StringIO(),
    )  # fmt: skip
    lines = out.getvalue().splitlines()
    check = LabelCheck.objects.get(pk=int(lines[0]))
    assert check.state == LabelCheck.State.DONE, check.error
    assert lines[1] == f"60 images checked, {check.suspects} suspects"
    # Three small folds of LeNet do not find every flip every time; what they doubt is flipped.
    suspects = [line.split(":")[0] for line in lines[2:]]
    assert len(suspects) >= 2 and set(suspects) <= {f"train {index}" for index in FLIPPED}, out.getvalue()
