"""Early stopping wherever a run is configured (the new-run form, POST /api/runs/, manage.py
train --config), refused alike by the trainer's own rules; and a run on the real worker whose
validation accuracy stops improving ends at the right epoch, the reason in its timeline."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.support.waiting import wait_for_state
from tests.workbench.runs.web.test_wizard import errors_of, valid
from workbench.runs.models import Run
from workbench.runs.services import run_submit

EARLY = {"early_stopping_patience": 2, "early_stopping_min_delta": 0.01}
NO_VALIDATIONS = "needs validations during the run: set val_interval above 0"


def api_create(client, dataset, config):
    body = {"dataset": dataset.pk, "network": "lenet", "epochs": 2, "batch_size": 8, "gpus": "cpu", "config": config}
    return client.post(reverse("api-runs"), body, content_type="application/json")


@pytest.mark.django_db
def test_it_takes_early_stopping_from_the_form_and_refuses_it_without_validations(owner_client, dataset):
    form = {key: str(value) for key, value in EARLY.items()}
    refused = owner_client.post(reverse("run-new"), valid(dataset, val_interval="0", **form))
    assert NO_VALIDATIONS in errors_of(refused)["early_stopping_patience"]
    refused = owner_client.post(reverse("run-new"), valid(dataset, early_stopping_patience="-1"))
    assert "greater than or equal to 0" in errors_of(refused)["early_stopping_patience"]
    assert not Run.objects.exists()

    response = owner_client.post(reverse("run-new"), valid(dataset, best_metric="val_loss", **form))
    run = Run.objects.get()
    assert response.status_code == 302
    assert run.config["best_metric"] == "val_loss"
    assert (run.config["early_stopping_patience"], run.config["early_stopping_min_delta"]) == (2, 0.01)
    clone = owner_client.get(reverse("run-new") + f"?clone={run.pk}").context["form"]
    assert clone.initial["early_stopping_patience"] == 2 and clone.initial["early_stopping_min_delta"] == 0.01


@pytest.mark.django_db
def test_it_takes_early_stopping_from_the_api_and_the_command_line(owner_client, owner, dataset, tmp_path):
    created = api_create(owner_client, dataset, EARLY)
    assert created.status_code == 201, created.json()
    assert created.json()["config"]["early_stopping_patience"] == 2
    refused = api_create(owner_client, dataset, {"early_stopping_patience": -1})
    assert refused.json() == {"config": ["early_stopping_patience: -1 must be a non-negative integer up to 100000"]}
    refused = api_create(owner_client, dataset, {**EARLY, "val_interval": 0})
    assert refused.json() == {"config": [f"early_stopping_patience: {NO_VALIDATIONS} (epochs between validations)"]}

    config = tmp_path / "early.json"
    config.write_text(json.dumps({**EARLY, "best_metric": "val_loss"}))
    out = io.StringIO()
    call_command("train", "--dataset", str(dataset.pk), "--network", "lenet", "--epochs", "3", "--batch-size", "8",
                 "--gpus", "cpu", "--config", str(config), stdout=out)  # fmt: skip
    run = Run.objects.get(pk=int(out.getvalue()))
    assert run.config["early_stopping_min_delta"] == 0.01 and run.config["best_metric"] == "val_loss"
    config.write_text(json.dumps({"early_stopping_min_delta": "a lot"}))
    with pytest.raises(CommandError, match="config: early_stopping_min_delta: 'a lot' must be between 0 and 1000000"):
        call_command("train", "--dataset", str(dataset.pk), "--network", "lenet", "--epochs", "3",
                     "--batch-size", "8", "--gpus", "cpu", "--config", str(config))  # fmt: skip


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_ends_a_run_whose_accuracy_stops_improving_at_the_right_epoch_on_the_worker(
    celery_worker, owner, owner_client, dataset
):
    # A learning rate too small to move the weights: the same accuracy at every validation, so a
    # patience of 2 ends the run after its third validation, at epoch 3 of 10.
    config = {"batch_size": 8, "epochs": 10, "data": {"num_workers": 0}, "solver": {"base_lr": 1e-12}, **EARLY}
    run = run_submit(owner=owner, dataset=dataset, name="plateau", network="lenet", config=config, gpus="cpu")
    wait_for_state(run, Run.State.DONE, Run.State.FAILED, timeout=240)
    assert run.state == Run.State.DONE, run.error
    epochs = [round(e.epoch) for e in run.events.filter(kind="validation").order_by("seq")]
    assert epochs == [1, 2, 3]
    timeline = owner_client.get(reverse("api-run", args=[run.pk])).json()["transitions"]
    assert timeline[-1]["to_state"] == "done"
    assert timeline[-1]["reason"].startswith("stopped early at epoch 3 of 10: top1 has not improved by more than 0.01")
    assert "the best checkpoint is kept" in timeline[-1]["reason"]
