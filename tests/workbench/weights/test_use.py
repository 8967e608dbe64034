"""Using the store: the staff page, and `weights:<id>` as a run's start in the one validator."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from workbench.runs.attempts.config import run_config
from workbench.runs.models import Run
from workbench.weights.models import StoredWeights

pytestmark = pytest.mark.django_db


def test_it_shows_staff_what_is_there_and_what_to_drop_in(client, staff_user, other_user, lab_weights):
    client.force_login(other_user)
    assert client.get(reverse("weights")).status_code == 404
    assert 'href="/weights/"' not in client.get(reverse("home")).content.decode()

    client.force_login(staff_user)
    page = client.get(reverse("weights")).content.decode()

    assert f"<code>weights:{lab_weights.pk}</code></td>" in page and "local weights lab (unverified)" in page
    assert 'href="/weights/"' in page and str(lab_weights.file.parent) not in page
    # Networks with nothing here: the exact published file name, and where it goes said once.
    page = client.get(reverse("weights"), {"q": "resnet18"}).content.decode()
    assert "<code>resnet18-f37072fd.pth</code>" in page and "go into <code>WORKBENCH_WEIGHTS_DIR</code>" in page
    assert "top-1 69.758% (ImageNet-1k)" in page
    assert "box mAP 22.8 (COCO)" in client.get(reverse("weights"), {"q": "fasterrcnn_mobilenet"}).content.decode()


def submit(client, dataset, **config):
    body = {"dataset": dataset.pk, "network": "mobilenet_v3_small", "epochs": 1, "batch_size": 8, "gpus": "cpu",
            "config": config}  # fmt: skip
    return client.post(reverse("api-runs"), body, content_type="application/json")


def test_it_starts_a_run_from_weights_of_the_store_by_reference(owner_client, owner, lab_weights):
    dataset = make_dataset_row(owner, name="photos", status=Dataset.Status.BUILDING)

    refused = submit(owner_client, dataset, pretrained="weights:999")
    assert refused.status_code == 400 and refused.json()["config"][0].startswith("pretrained: no such weights")
    wrong = owner_client.post(
        reverse("api-runs"),
        {"dataset": dataset.pk, "network": "resnet18", "gpus": "cpu", "config": {"pretrained": lab_weights.reference}},
        content_type="application/json",
    )
    assert wrong.json() == {
        "config": [
            f"pretrained: weights:{lab_weights.pk} are mobilenet_v3_small weights; "
            "choose network mobilenet_v3_small to start from them"
        ]
    }
    assert submit(owner_client, dataset, freeze_bn=True).json() == {
        "config": ["freeze_bn: fine-tunes pretrained weights: choose weights to start from"]
    }

    response = submit(owner_client, dataset, pretrained=lab_weights.reference, freeze_backbone_epochs=1)

    assert response.status_code == 201, response.json()
    assert response.json()["config"]["pretrained"] == lab_weights.reference  # never the path
    run = Run.objects.get(pk=response.json()["id"])
    assert run.config["pretrained"] == lab_weights.reference  # stored as the reference
    assert run_config(run)["pretrained"] == str(lab_weights.file)  # what the trainer reads, from launch
    assert run.config["data"]["norm_std"] == [0.229, 0.224, 0.225] and run.config["freeze_backbone_epochs"] == 1
    assert StoredWeights.objects.count() == 1


def test_it_starts_a_run_from_weights_of_the_store_from_the_command_line(owner, lab_weights):
    dataset = make_dataset_row(owner, name="photos", status=Dataset.Status.BUILDING)
    argv = ["--dataset", str(dataset.pk), "--network", "mobilenet_v3_small", "--epochs", "1", "--gpus", "cpu"]

    with pytest.raises(CommandError, match=r"^config: pretrained: no such weights"):
        call_command("train", *argv, "--weights", "999", stdout=io.StringIO())
    with pytest.raises(CommandError, match="give --pretrained or --weights, not both"):
        call_command("train", *argv, "--weights", str(lab_weights.pk), "--pretrained", "run:1", stdout=io.StringIO())
    out = io.StringIO()
    call_command("train", *argv, "--weights", str(lab_weights.pk), "--freeze-backbone-epochs", "1", stdout=out)

    run = Run.objects.get(pk=int(out.getvalue()))
    # What the API stores for the same request (test above): the reference, the
    # weights' own normalisation, the fine-tuning field.
    assert run.config["pretrained"] == lab_weights.reference
    assert run.config["data"]["norm_std"] == [0.229, 0.224, 0.225] and run.config["freeze_backbone_epochs"] == 1
