"""The run page's best marker in Chromium, with a weights' average (EMA) on: it follows the
weights each validation's checkpoint holds (the better of the raw weights and their average, as
the trainer recorded it) as events arrive live, and says whose they are (issue 33)."""

from __future__ import annotations

import pytest

from datasets.models import Dataset
from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from tests.workbench.runs.web.test_best_ema import VALIDATIONS
from tests.workbench.runs.web.test_e2e_live import off_the_loop
from trainer.protocol import checkpoint_weights
from workbench.runs.lifecycle import run_events_append
from workbench.runs.services import run_create

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BEST = "document.querySelector('#run-best').textContent"


def validation(epoch: int, top1: float, ema_top1: float) -> dict:
    """A validation event as the trainer writes it, recording whose weights its checkpoint holds."""
    values = {"top1": top1, "ema_top1": ema_top1}
    weights = checkpoint_weights("top1", values, averaged=True)
    return {"type": "validation", "time": 1000.0 + epoch, "step": 10 * epoch, "epoch": epoch, **values,
            "weights": weights}  # fmt: skip


def test_it_moves_the_best_marker_with_the_weights_each_checkpoint_holds(live_server_url, page, owner):
    dataset = make_dataset_row(owner, status=Dataset.Status.BUILDING)  # unschedulable
    run = run_create(owner=owner, dataset=dataset, name="ema", network="lenet",
                     config={"solver": {"ema_decay": 0.99}}, device_request={"kind": "cpu"})  # fmt: skip
    history = [validation(epoch, top1, ema_top1) for epoch, top1, _, ema_top1, _ in VALIDATIONS]
    off_the_loop(run_events_append, run_id=run.pk, events=history)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    page.wait_for_function("document.querySelector('#stream-state').textContent.startsWith('live')")
    # The raw weights' 90.00% at epoch 2 beat the average's best (85.00% at epoch 3): issue 33.
    assert page.evaluate(BEST) == "top-1 90.00% at epoch 2 (raw weights)"

    # Live: the average overtakes, then an equal value later keeps the later checkpoint.
    off_the_loop(run_events_append, run_id=run.pk, events=[validation(5, 0.80, 0.93)])
    page.wait_for_function(f"{BEST} === 'top-1 93.00% at epoch 5 (EMA)'")
    off_the_loop(run_events_append, run_id=run.pk, events=[validation(6, 0.93, 0.90)])
    page.wait_for_function(f"{BEST} === 'top-1 93.00% at epoch 6 (raw weights)'")
