"""The model zoo and the recipes on the web side: the zoo's fits in their own answer, refusals
before anything is queued (colour jitter on grey images, a crop larger than the images, an
unknown timm name), a sweep over presets, and the augmentation preview of the new-run form."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.urls import reverse

from tests.support.factories import make_dataset_row
from tests.workbench.runs.web.test_wizard import valid
from workbench.runs.models import Run
from workbench.runs.web import wizard_views


def _sweep(client, dataset, grid, config=None, network="lenet"):
    # A batch of 8: "bars" has 24 training images (the pre-flight refuses a batch larger than them).
    body = {"dataset": dataset.pk, "network": network, "epochs": 1, "batch_size": 8, "gpus": "cpu", "name": "grid",
            "sweep": grid}  # fmt: skip
    return client.post(reverse("api-sweeps"), {**body, "config": config or {}}, content_type="application/json")


def test_it_sizes_the_zoo_a_few_networks_at_a_time(owner_client, dataset, monkeypatch):
    asked = "timm/convnext_atto,timm/vit_tiny_patch16_224,timm/resnet18d,timm/nonesuch"
    body = owner_client.get(reverse("run-new-networks"), {"dataset": dataset.pk, "only": asked}).json()
    fits = body["networks"]
    assert set(fits) == {"timm/convnext_atto", "timm/vit_tiny_patch16_224", "timm/resnet18d"}
    assert fits["timm/convnext_atto"]["problem"] == "timm/convnext_atto needs images of at least 32x32, dataset is 8x8"
    assert "multiples of 16" in fits["timm/vit_tiny_patch16_224"]["problem"]
    assert fits["timm/resnet18d"]["problem"] == "" and fits["timm/resnet18d"]["params"] > 10_000_000
    assert fits["timm/resnet18d"]["gflops"] > 0
    # The classic answer (lenet alone here: the others take a dozen builds each at 8x8).
    monkeypatch.setattr(
        wizard_views, "NETWORK_INFO", {n: wizard_views.NETWORK_INFO[n] for n in ("lenet", "timm/resnet18d")}
    )
    classic = owner_client.get(reverse("run-new-networks"), {"dataset": dataset.pk}).json()["networks"]
    assert set(classic) == {"lenet"} and classic["lenet"]["gflops"] > 0


def test_it_refuses_what_the_images_cannot_take_before_anything_is_queued(owner_client, dataset):
    # The dataset's images are 8x8 grey.
    cases = [
        ({"data": {"color_jitter": 0.4}}, "lenet", "config", "data.color_jitter: needs colour images"),
        ({"data": {"crop_size": 12, "random_resized_crop": True}}, "lenet", "config", "data.crop_size: 12 is larger"),
        ({}, "timm/resnet9000", "network", "is not a valid choice"),
    ]
    for config, network, field, words in cases:
        response = _sweep(owner_client, dataset, {"lr": [0.01]}, config, network)
        assert response.status_code == 400, response.json()
        assert words in str(response.json().get(field)), (field, response.json())
    assert not Run.objects.exists()


def test_it_sweeps_over_presets_keeping_what_the_request_sends(owner_client, dataset):
    response = _sweep(owner_client, dataset, {"preset": ["deit", "finetune_small"]}, {"solver": {"base_lr": 0.002}})
    assert response.status_code == 201, response.json()
    runs = {run["name"]: run["config"] for run in response.json()["results"]}
    deit, small = runs["grid preset=deit"], runs["grid preset=finetune_small"]
    assert deit["solver"]["optimizer"] == "adamw" and deit["data"]["mixup_alpha"] == 0.8
    assert small["solver"]["lr_policy"] == "cosine" and small["data"]["random_resized_crop"] is True
    assert deit["solver"]["base_lr"] == small["solver"]["base_lr"] == 0.002  # sent: wins over the presets
    # A clone shows the recipe as the form takes it again.
    deit_run = Run.objects.get(name="grid preset=deit")
    form = owner_client.get(reverse("run-new"), {"clone": deit_run.pk}).context["form"]
    assert (form["preset"].value(), form["rrc_scale"].value(), form["auto_augment"].value()) == (
        "deit",
        "0.08, 1",
        "randaugment",
    )


def test_it_previews_eight_augmented_copies_of_a_training_image(owner, owner_client, dataset):
    url = reverse("run-new-augment-preview")
    fields = {
        "dataset": dataset.pk,
        "random_resized_crop": "on",
        "rrc_scale": "0.3, 1",
        "auto_augment": "trivialaugment",
    }
    body = owner_client.post(url, {**fields, "crop_size": "6", "random_erasing": "0.5"}).json()
    assert len(body["images"]) == 8 and body["size"] == [6, 6]
    assert all(image.startswith("data:image/png;base64,") for image in body["images"])
    assert len(set(body["images"])) > 1
    refused = owner_client.post(url, {**fields, "color_jitter": "0.4"})
    assert refused.status_code == 400 and "grey" in refused.json()["errors"]["color_jitter"]
    boxes = make_dataset_row(owner, name="boxes", task="detection",
                                   labels=["square"], image_width=64, image_height=64, channels=3)  # fmt: skip
    refused = owner_client.post(url, {"dataset": boxes.pk, "crop_size": "32"})
    assert refused.status_code == 400
    assert "flip, scale-jitter and crop each image together with its boxes" in refused.json()["errors"]["__all__"]
    page = owner_client.get(reverse("run-new")).content.decode()
    assert 'id="presets"' in page and "transfer_learning_tutorial" in page
    assert "runs on the device, on the uint8 batch" in page and "runs in the loader (CPU workers)" in page


def test_it_queues_a_zoo_network_with_a_preset_from_the_command_line(owner, dataset):
    out = io.StringIO()
    call_command("train", "--dataset", str(dataset.pk), "--network", "timm/resnet18d", "--epochs", "1",
                 "--batch-size", "4", "--gpus", "cpu", "--preset", "finetune_small", stdout=out)  # fmt: skip
    run = Run.objects.get(pk=int(out.getvalue()))
    assert run.network == "timm/resnet18d" and run.config["preset"] == "finetune_small"
    assert run.config["epochs"] == 1 and run.config["solver"]["lr_policy"] == "cosine"  # given, then the preset's


@pytest.mark.parametrize(("sent", "stored"), [("raw", "raw"), ("ema", "ema"), ("", None)])
def test_it_takes_the_weights_the_best_checkpoint_holds_from_the_form(owner_client, dataset, sent, stored):
    # Issue 33: no way to choose the raw weights over an average that trailed.
    response = owner_client.post(reverse("run-new"), valid(dataset, ema_decay="0.99", best_weights=sent))
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert Run.objects.latest("pk").config["best_weights"] == stored


def test_it_refuses_the_average_as_best_without_one(owner_client, dataset):
    response = owner_client.post(reverse("run-new"), valid(dataset, best_weights="ema"))
    assert response.status_code == 200 and "set solver.ema_decay above 0" in response.content.decode()
