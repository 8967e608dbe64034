"""The new-run form's "From pretrained weights": the store's weights of the chosen network, checked
by the one rule of the API and the CLI, with the fine-tuning fields."""

from __future__ import annotations

import re

import torch
import torchvision
from django.urls import reverse

from tests.workbench.runs.web.test_wizard import errors_of
from tests.workbench.runs.web.test_wizard import valid as valid_run
from workbench.runs.models import Run
from workbench.weights.services import weights_import


def valid(dataset, **changes) -> dict:
    return valid_run(dataset, **{"auto_augment": "none", **changes})  # the recipe's choice: required


def test_it_starts_a_run_from_the_stores_weights_with_the_fine_tuning_fields(owner_client, dataset, settings, tmp_path):
    settings.WEIGHTS_DIR = tmp_path / "weights"
    torch.save(torchvision.models.mobilenet_v3_small(weights=None).state_dict(), tmp_path / "lab.pth")
    stored, _ = weights_import(source=tmp_path / "lab.pth", network="mobilenet_v3_small", tag="lab")
    stored.mean, stored.std = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]
    stored.save()
    chosen = {"network": "mobilenet_v3_small", "start_from": "weights"}

    page = owner_client.get(reverse("run-new")).content.decode()
    assert f'<option value="{stored.pk}">mobilenet_v3_small: local weights lab (unverified)</option>' in page
    assert errors_of(owner_client.post(reverse("run-new"), valid(dataset, **chosen))) == {
        "stored_weights": "Choose the pretrained weights to start from."
    }
    assert errors_of(owner_client.post(reverse("run-new"), valid(dataset, freeze_bn="on"))) == {
        "freeze_bn": "fine-tunes pretrained weights: choose weights to start from"
    }

    response = owner_client.post(reverse("run-new"), valid(
        dataset, **chosen, stored_weights=str(stored.pk), freeze_backbone_epochs="1", backbone_lr_mult="0.1",
        freeze_bn="on"))  # fmt: skip

    run = Run.objects.get()
    assert response.status_code == 302, errors_of(response)
    assert run.config["pretrained"] == stored.reference
    assert (run.config["freeze_backbone_epochs"], run.config["backbone_lr_mult"], run.config["freeze_bn"]) == (
        1,
        0.1,
        True,
    )
    assert (run.config["data"]["norm_mean"], run.config["data"]["norm_std"]) == ([0.5] * 3, [0.25] * 3)


def test_it_clones_a_run_from_the_stores_weights_with_them_chosen(owner_client, owner, dataset, settings, tmp_path):
    from workbench.runs.services import run_create

    settings.WEIGHTS_DIR = tmp_path / "weights"
    torch.save(torchvision.models.mobilenet_v3_small(weights=None).state_dict(), tmp_path / "lab.pth")
    stored, _ = weights_import(source=tmp_path / "lab.pth", network="mobilenet_v3_small", tag="lab")
    run = run_create(owner=owner, dataset=dataset, name="tuned", network="mobilenet_v3_small",
                     config={"pretrained": stored.reference}, device_request={"kind": "cpu"})  # fmt: skip
    response = owner_client.get(reverse("run-new"), {"clone": run.pk})
    form = response.context["form"]
    # "From pretrained weights" with the store's row chosen, as the run was made (issue 33).
    assert (form["start_from"].value(), form["stored_weights"].value()) == ("weights", str(stored.pk))
    html = response.content.decode()
    [checked] = re.findall(r'<input type="radio" name="start_from" value="(\w+)"[^>]*\bchecked>', html)
    assert checked == "weights"
    assert f'<option value="{stored.pk}" selected>mobilenet_v3_small: local weights lab' in html
