"""The run page's best marker in Chromium, with a weights' average (EMA) on: it follows the
average's validation as events arrive live, not the raw weights' (whose better value it ignores)."""

from __future__ import annotations

import pytest

from datasets.models import Dataset
from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from tests.workbench.runs.web.test_best_ema import VALIDATIONS
from tests.workbench.runs.web.test_e2e_live import off_the_loop
from workbench.runs.lifecycle import run_events_append
from workbench.runs.services import run_create

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BEST = "document.querySelector('#run-best').textContent"


def validation(epoch: int, top1: float, ema_top1: float) -> dict:
    return {"type": "validation", "time": 1000.0 + epoch, "step": 10 * epoch, "epoch": epoch, "top1": top1,
            "ema_top1": ema_top1}  # fmt: skip


def test_it_moves_the_best_marker_with_the_averages_validation_only(live_server_url, page, owner):
    dataset = make_dataset_row(owner, status=Dataset.Status.BUILDING)  # unschedulable
    run = run_create(owner=owner, dataset=dataset, name="ema", network="lenet",
                     config={"solver": {"ema_decay": 0.99}}, device_request={"kind": "cpu"})  # fmt: skip
    history = [validation(epoch, top1, ema_top1) for epoch, top1, _, ema_top1, _ in VALIDATIONS]
    off_the_loop(run_events_append, run_id=run.pk, events=history)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    page.wait_for_function("document.querySelector('#stream-state').textContent.startsWith('live')")
    assert page.evaluate(BEST) == "top-1 85.00% at epoch 3 (EMA)"  # the raw weights' best is 90.00% at epoch 2

    # Live: the raw weights improve, the average does not: best.pt stays, and so does the marker.
    off_the_loop(run_events_append, run_id=run.pk, events=[validation(5, 0.99, 0.84)])
    page.wait_for_function("runPage.store.get('top1')?.value.length === 5")
    assert page.evaluate(BEST) == "top-1 85.00% at epoch 3 (EMA)"
    off_the_loop(run_events_append, run_id=run.pk, events=[validation(6, 0.95, 0.88)])
    page.wait_for_function(f"{BEST} === 'top-1 88.00% at epoch 6 (EMA)'")
