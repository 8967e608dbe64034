"""One best: with a weights' average (EMA) on, best.pt is chosen on the average's validation
(ema_<metric>), and every place that says "best" (the run page, its API, the runs list, the
checkpoint picker) reads that series, from workbench.runs.selectors.run_best / reported_as."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from trainer.checkpoint import CheckpointStore
from workbench.inference.services import checkpoint_choices
from workbench.runs import series
from workbench.runs.lifecycle import run_events_append
from workbench.runs.models import Run
from workbench.runs.services import run_create

pytestmark = pytest.mark.django_db

# The raw weights peak at epoch 2; their average lags and peaks at epoch 3 (what best.pt holds).
VALIDATIONS = [
    # epoch, top1, val_loss, ema_top1, ema_val_loss
    (1, 0.50, 1.20, 0.40, 1.40),
    (2, 0.90, 0.30, 0.70, 0.80),
    (3, 0.80, 0.50, 0.85, 0.45),
    (4, 0.85, 0.40, 0.80, 0.50),
]


def run_with(owner, config: dict, *, averaged: bool = True) -> Run:
    dataset = make_dataset_row(owner, status=Dataset.Status.BUILDING)  # unschedulable
    run = run_create(
        owner=owner, dataset=dataset, name="ema", network="lenet", config=config, device_request={"kind": "cpu"}
    )
    series.forget(run.pk)
    events = []
    for epoch, top1, val_loss, ema_top1, ema_val_loss in VALIDATIONS:
        data = {"top1": top1, "val_loss": val_loss}
        if averaged:
            data |= {"ema_top1": ema_top1, "ema_val_loss": ema_val_loss}
        events.append({"type": "validation", "time": 1000.0 + epoch, "step": 10 * epoch, "epoch": epoch, **data})
    run_events_append(run_id=run.pk, events=events)
    return run


def page_data(html: str) -> dict:
    return json.loads(html.split('id="run-page" type="application/json">')[1].split("</script>")[0])


def test_it_says_the_best_of_the_weights_average_where_the_checkpoint_was_chosen_on_it(owner_client, owner):
    run = run_with(owner, {"solver": {"ema_decay": 0.99}})
    html = owner_client.get(f"/runs/{run.pk}/").content.decode()
    assert '<dd id="run-best">top-1 85.00% at epoch 3 (EMA)</dd>' in html  # not the raw 90.00% at epoch 2
    assert "of the weights' average (EMA), which the checkpoints and exports hold" in html
    page = page_data(html)
    assert page["best_metric"] == "top1" and page["best_series"] == "ema_top1" and page["best_averaged"] is True
    best = {"metric": "top1", "series": "ema_top1", "averaged": True, "value": 0.85, "epoch": 3.0, "step": 30}
    assert page["best"] == best
    assert owner_client.get(reverse("api-run", args=[run.pk])).json()["best"] == best

    row = owner_client.get("/runs/").content.decode().split(f'id="run-{run.pk}"')[1].split("</tr>")[0]
    # The list's last and best validation are the average's too (80.00% last, 85.00% best; 0.45 best loss).
    headline = row.split('class="metric-headline">')[1].split("</td>")[0]
    assert "top-1</span> 80.00% / 85.00%" in headline and ">EMA</span>" in headline
    assert "/ 0.4500" in row.split('class="metric-loss">')[1].split("</td>")[0]


def test_it_keeps_the_raw_best_without_an_average_and_follows_the_metric_asked_for(owner_client, owner):
    run = run_with(owner, {"solver": {"ema_decay": 0}}, averaged=False)
    html = owner_client.get(f"/runs/{run.pk}/").content.decode()
    assert '<dd id="run-best">top-1 90.00% at epoch 2</dd>' in html
    assert owner_client.get(reverse("api-run", args=[run.pk])).json()["best"]["series"] == "top1"
    # best_metric val_loss with EMA from the preset (DeiT's recipe sets ema_decay): the lowest average loss.
    run = run_with(owner, {"preset": "deit", "best_metric": "val_loss"})
    best = owner_client.get(reverse("api-run", args=[run.pk])).json()["best"]
    assert (best["series"], best["value"], best["epoch"]) == ("ema_val_loss", 0.45, 3.0)
    assert (
        '<dd id="run-best">val. loss 0.4500 at epoch 3 (EMA)</dd>'
        in owner_client.get(f"/runs/{run.pk}/").content.decode()
    )


def test_it_has_no_best_before_the_first_validation(owner_client, owner):
    dataset = make_dataset_row(owner, status=Dataset.Status.BUILDING)
    run = run_create(
        owner=owner, dataset=dataset, name="new", network="lenet", config={}, device_request={"kind": "cpu"}
    )
    assert owner_client.get(reverse("api-run", args=[run.pk])).json()["best"] is None
    assert '<dd id="run-best">–</dd>' in owner_client.get(f"/runs/{run.pk}/").content.decode()


def test_it_labels_the_best_checkpoint_with_the_numbers_of_the_weights_it_holds(owner):
    run = run_with(owner, {"solver": {"ema_decay": 0.99}})
    metrics = {"top1": 0.8, "val_loss": 0.5, "ema_top1": 0.85, "ema_val_loss": 0.45, "epoch": 3}
    CheckpointStore(run.run_dir).save({"model": {}}, step=30, is_best=True, metrics=metrics)
    best = checkpoint_choices(run=run)[0]
    assert best == {"value": "best", "label": "best: step 30 (top-1 85.00%, val. loss 0.4500 of the EMA)"}
