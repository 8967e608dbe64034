"""A search's weights (its base's config.pretrained) are checked when it is created, by the runs'
own rule, for every network its trials may have: through the API, the form and the command line,
not refused by each trial at its start."""

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.workbench.runs.conftest import TINY_CONFIG
from tests.workbench.runs.web.test_wizard import fake_checkpoint
from tests.workbench.searches.test_forms import posted
from workbench.runs.models import Run
from workbench.runs.services import run_create
from workbench.searches.models import Search
from workbench.weights.references import REFUSED as PRETRAINED_REFUSED

pytestmark = pytest.mark.django_db(transaction=True)  # a search's study is made through Optuna's own connection

LR = {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1}}
NETWORKS = {**LR, "network": {"type": "choice", "values": ["lenet", "resnet18"]}}


def _lenet_run(owner, dataset) -> Run:
    """A run of `owner`'s with a best checkpoint: weights a lenet may start from."""
    run = run_create(owner=owner, dataset=dataset, name="prev", network="lenet", config={}, device_request={})
    fake_checkpoint(run)
    return run


def _create(client, dataset, pretrained: str, space: dict):
    config = {**TINY_CONFIG, "pretrained": pretrained}
    body = {"dataset": dataset.pk, "network": "lenet", "gpus": "cpu", "config": config, "space": space, "trials": 2,
            "parallel": 1}  # fmt: skip
    return client.post(reverse("api-searches"), body, content_type="application/json")


def test_it_refuses_weights_no_trial_may_use_through_the_api(owner_client, owner, other_user, dataset):
    theirs = _lenet_run(other_user, dataset)
    response = _create(owner_client, dataset, f"run:{theirs.pk}", LR)
    assert response.status_code == 400 and response.json() == {"config": [f"pretrained: {PRETRAINED_REFUSED}"]}

    mine = _lenet_run(owner, dataset)
    response = _create(owner_client, dataset, f"run:{mine.pk}", NETWORKS)  # lenet's weights for a resnet18 trial
    assert response.status_code == 400
    assert response.json() == {
        "config": [f"pretrained: 'resnet18': run #{mine.pk} trained a lenet; choose network lenet to start from "
                   "its weights"]
    }  # fmt: skip
    assert not Search.objects.exists() and Run.objects.count() == 2

    created = _create(owner_client, dataset, f"run:{mine.pk}", LR)
    assert created.status_code == 201, created.json()
    assert Search.objects.get().base_request["config"]["pretrained"] == f"run:{mine.pk}"


def test_it_refuses_weights_no_trial_may_use_in_the_form(owner_client, owner, dataset):
    mine = _lenet_run(owner, dataset)
    data = posted(dataset, params="network=choice:lenet,resnet18")
    response = owner_client.post(reverse("search-new"), {**data, "start_from": "run", "previous_run": str(mine.pk)})
    assert response.status_code == 200 and not Search.objects.exists()
    errors = response.context["form"].errors
    assert errors["start_from"] == [f"'resnet18': run #{mine.pk} trained a lenet; choose network lenet to start from "
                                    "its weights"]  # fmt: skip


def test_it_refuses_weights_no_trial_may_use_on_the_command_line(owner, dataset):
    common = ["search", "--dataset", str(dataset.pk), "--network", "lenet", "--gpus", "cpu", "--batch-size", "4",
              "--param", "lr=loguniform:1e-4:1e-1"]  # fmt: skip
    with pytest.raises(CommandError, match=r"^config: pretrained: no such weights you can use"):
        call_command(*common, "--pretrained", "run:999999", stdout=io.StringIO())
    assert not Search.objects.exists()
