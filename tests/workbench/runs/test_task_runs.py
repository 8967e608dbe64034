"""Runs on detection and segmentation datasets (issue 22): the form, the API and the CLI take the
dataset's task's networks and refuse another task's by one rule; the new-run page lists only the
task's networks with their sizes; the run page follows the task's metric."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.support.factories import make_dataset_row
from trainer.protocol import TASK_NETWORKS
from workbench.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def detection(owner):
    return make_dataset_row(owner, name="shapes", task="detection",
                                  image_width=64, image_height=64, channels=3, labels=["square", "disc"])  # fmt: skip


def create(client, dataset, network: str):
    body = {"dataset": dataset.pk, "network": network, "epochs": 1, "batch_size": 4, "gpus": "cpu"}
    return client.post(reverse("api-runs"), body, content_type="application/json")


def test_it_takes_only_the_datasets_task_networks_from_api_and_cli(owner_client, owner, detection):
    refused = create(owner_client, detection, "resnet18")
    assert refused.status_code == 400
    assert refused.json()["network"][0].startswith("resnet18 is not a detection network; choose one of fasterrcnn")
    with pytest.raises(CommandError, match="lraspp_mobilenet_v3_large is not a detection network"):
        call_command("train", "--dataset", str(detection.pk), "--network", "lraspp_mobilenet_v3_large",
                     "--gpus", "cpu", "--owner", owner.username)  # fmt: skip
    assert not Run.objects.exists()
    made = create(owner_client, detection, "fasterrcnn_mobilenet_v3_large_320_fpn")
    assert made.status_code == 201, made.json()
    tiny = make_dataset_row(owner, name="tiny", task="segmentation",
                                  image_width=16, image_height=16, channels=3, labels=["bg", "fg"])  # fmt: skip
    small = create(owner_client, tiny, "lraspp_mobilenet_v3_large")
    assert small.status_code == 400 and "needs images of at least 32x32, dataset is 16x16" in small.json()["network"][0]


def test_it_lists_the_tasks_networks_with_their_parameters_and_follows_the_tasks_metric(owner_client, detection):
    body = owner_client.get(reverse("run-new-networks"), {"dataset": detection.pk}).json()
    assert body["task"] == "detection"
    assert body["networks"]["lenet"] == {"params": None, "problem": "", "other_task": True}
    for name in TASK_NETWORKS["detection"]:
        assert body["networks"][name]["problem"] == "" and body["networks"][name]["params"] > 1e6
    # The MobileNet detectors see these 64x64 images at 128 (trainer.tasks.detection.detector_side).
    upscaled = "upscaled inside to a short side of 128"
    assert upscaled in body["networks"]["fasterrcnn_mobilenet_v3_large_320_fpn"]["note"]
    assert upscaled not in body["networks"]["fasterrcnn_resnet50_fpn_v2"]["note"]
    run = Run.objects.get(pk=create(owner_client, detection, "ssdlite320_mobilenet_v3_large").json()["id"])
    page = owner_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert '"best_metric": "map"' in page and '"best_metric_higher": true' in page


def test_it_refuses_a_best_metric_the_datasets_task_does_not_report_before_anything_is_queued(
    owner_client, owner, detection
):
    body = {"dataset": detection.pk, "network": "fasterrcnn_mobilenet_v3_large_320_fpn", "epochs": 1,
            "batch_size": 4, "gpus": "cpu", "config": {"best_metric": "val_loss"}}  # fmt: skip
    refused = owner_client.post(reverse("api-runs"), body, content_type="application/json")
    assert refused.status_code == 400
    assert refused.json()["config"] == [
        "best_metric: 'val_loss' is not a metric of detection (map, map_50, map_75, mar_100)"
    ]
    digits = make_dataset_row(owner, name="digits", image_width=8,
                                    image_height=8, channels=1, labels=["0", "1"])  # fmt: skip
    body = {"dataset": digits.pk, "network": "lenet", "epochs": 1, "batch_size": 4, "gpus": "cpu",
            "config": {"best_metric": "miou"}}  # fmt: skip
    assert owner_client.post(reverse("api-runs"), body, content_type="application/json").status_code == 400
    assert not Run.objects.exists()
    # The classification default on another task's dataset means that task's first metric.
    body = {**body, "dataset": detection.pk, "network": "fasterrcnn_mobilenet_v3_large_320_fpn",
            "config": {"best_metric": "top1"}}  # fmt: skip
    assert owner_client.post(reverse("api-runs"), body, content_type="application/json").status_code == 201
