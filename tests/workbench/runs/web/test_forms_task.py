"""The new-run form on a dataset's task (workbench/runs/web/forms_task.py): it opens with a batch
the pre-flight takes on the dataset's training images and the task's own best metric, marks the
classifier's loader fields for the page to hide on another task, and keeps a clone's values."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from tests.support.factories import make_dataset_row
from trainer.preflight import batch_refusal
from workbench.runs.services import run_create
from workbench.runs.web.forms_task import batch_default

pytestmark = pytest.mark.django_db


def detection_row(owner, *, train: int = 52):
    return make_dataset_row(
        owner, name="boxes", task="detection", image_width=160, image_height=120, labels=["car", "dog"],
        splits={"train": {"count": train}, "val": {"count": 13}},
    )  # fmt: skip


@pytest.mark.parametrize(("train", "batch"), [(52, 32), (64, 64), (1000, 64), (5, 4), (1, 1), (0, 64)])
def test_it_defaults_to_a_batch_the_preflight_takes(train, batch):
    assert batch_default(train) == batch
    assert batch_refusal(batch, train) is None


def test_it_opens_a_detection_dataset_with_a_batch_that_fits_and_its_own_metric(owner_client, owner):
    dataset = detection_row(owner)
    response = owner_client.get(reverse("run-new"), {"dataset": dataset.pk})
    form = response.context["form"]
    assert (form["batch_size"].value(), form["best_metric"].value()) == ("32", "map")  # not 64 and top-1
    html = response.content.decode()
    facts = json.loads(html.split('id="dataset-facts-data" type="application/json">')[1].split("</script>")[0])
    assert facts[str(dataset.pk)]["defaults"] == {"batch_size": "32", "best_metric": "map"}
    assert facts[str(dataset.pk)]["recipe"] is False
    for name in ("crop_size", "mean_subtraction", "vertical_flip"):  # the classifier's loader's, hidden elsewhere
        assert "data-classification-only" in form.fields[name].widget.attrs


def test_it_opens_the_first_dataset_with_its_defaults_when_none_is_asked_for(owner_client, owner):
    detection_row(owner)
    form = owner_client.get(reverse("run-new")).context["form"]
    assert (form["batch_size"].value(), form["best_metric"].value()) == ("32", "map")


def test_it_keeps_a_clones_batch_and_metric(owner_client, owner):
    dataset = detection_row(owner)
    config = {"batch_size": 8, "best_metric": "map_50"}
    run = run_create(owner=owner, dataset=dataset, name="orig", network="fasterrcnn_mobilenet_v3_large_320_fpn",
                     config=config, device_request={"kind": "cpu"})  # fmt: skip
    form = owner_client.get(reverse("run-new"), {"clone": run.pk}).context["form"]
    assert (form["batch_size"].value(), form["best_metric"].value()) == ("8", "map_50")


def test_it_takes_a_form_without_the_fields_another_task_is_not_offered(owner_client, owner):
    # The page disables the classifier's loader fields on a detection dataset: they are not sent.
    dataset = detection_row(owner)
    data = {
        "name": "d", "dataset": dataset.pk, "network": "fasterrcnn_mobilenet_v3_large_320_fpn",
        "start_from": "scratch", "optimizer": "sgd", "base_lr": "0.01", "momentum": "0.9", "weight_decay": "0",
        "lr_policy": "fixed", "gamma": "0.1", "power": "1", "step_size": "33", "step_values": "50", "min_lr": "0",
        "warmup_percent": "0", "onecycle_pct_start": "0.3", "onecycle_div_factor": "25",
        "onecycle_final_div_factor": "10000", "epochs": "1", "batch_size": "32", "grad_accum": "1",
        "val_interval": "1", "snapshot_interval": "1", "seed": "0", "precision": "fp32", "best_metric": "map",
        "num_workers": "0", "device_mode": "cpu", "gpu_count": "1",
    }  # fmt: skip
    response = owner_client.post(reverse("run-new"), data)
    assert response.status_code == 302, response.context["form"].errors
