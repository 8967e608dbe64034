"""One source of defaults (the trainer's config) and one priority rule, whichever way a run is made:
the new-run form, POST /api/runs/ and `manage.py train` store the same config for the same run, and
refuse the same priority with the same words."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.support.factories import make_dataset_row
from trainer.config import TrainConfig
from workbench.runs.models import Run
from workbench.runs.web.live_views import run_label

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(owner):
    """A ready dataset row with room for the default batch (no files: nothing here trains)."""
    return make_dataset_row(
        owner, name="digits", image_width=28, image_height=28, channels=1,
        labels=["a", "b", "c"], splits={"train": {"count": 1000}, "val": {"count": 100}},
    )  # fmt: skip


def _form_as_shown(client, dataset, **changes) -> dict:
    """What the new-run page sends when its fields are left as they are shown."""
    form = client.get(reverse("run-new"), {"dataset": dataset.pk}).context["form"]
    data = {}
    for name in form.fields:
        value = form[name].value()
        if value is not None and value is not False and value not in ("", []):
            data[name] = "on" if value is True else value
    return {**data, "device_mode": "cpu", **changes}


def _cli(*argv: str) -> Run:
    out = io.StringIO()
    call_command("train", *argv, stdout=out)
    return Run.objects.get(pk=int(out.getvalue()))


def test_it_stores_the_same_config_for_the_same_run_from_the_form_the_api_and_the_cli(owner_client, dataset):
    # The form showed lr_policy "step" and 30 epochs; the API and the CLI trained with "fixed" and 10.
    response = owner_client.post(reverse("run-new"), _form_as_shown(owner_client, dataset, name="form"))
    assert response.status_code == 302, response.context["form"].errors
    by_form = Run.objects.get(name="form")
    body = {"dataset": dataset.pk, "network": "lenet", "gpus": "cpu", "name": "api"}
    by_api = Run.objects.get(
        pk=owner_client.post(reverse("api-runs"), body, content_type="application/json").json()["id"]
    )
    by_cli = _cli("--dataset", str(dataset.pk), "--network", "lenet", "--gpus", "cpu", "--name", "cli")
    sweep = {**body, "name": "sweep", "sweep": {"lr": [0.01, 0.1]}}
    swept = owner_client.post(reverse("api-sweeps"), sweep, content_type="application/json").json()["results"]
    by_sweep = Run.objects.get(pk=swept[0]["id"])  # lr 0.01: the default
    assert by_form.config == by_api.config == by_cli.config == by_sweep.config
    defaults = TrainConfig()
    assert by_cli.config["solver"]["lr_policy"] == defaults.solver.lr_policy
    assert by_cli.config["epochs"] == defaults.epochs and by_cli.config["batch_size"] == defaults.batch_size


def test_it_shows_the_settings_a_run_trains_with_sent_or_defaulted(owner_client, dataset):
    # A run made by the CLI without --lr showed no learning rate in its label and summary.
    run = _cli("--dataset", str(dataset.pk), "--network", "lenet", "--gpus", "cpu", "--epochs", "3")
    assert "lr 0.01" in run_label(run) and "batch 64" in run_label(run)
    page = owner_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "lr 0.01" in page and "sgd" in page


def test_it_refuses_a_priority_with_the_same_words_from_the_form_the_api_and_the_cli(client, staff_user, owner):
    staff_set = make_dataset_row(
        staff_user, name="s", image_width=28, image_height=28, channels=1,
        labels=["a", "b"], splits={"train": {"count": 1000}},
    )  # fmt: skip
    client.force_login(staff_user)
    words = "101 is not a whole number between -100 and 100"
    form = client.post(reverse("run-new"), _form_as_shown(client, staff_set, priority="101"))
    assert form.context["form"].errors["priority"] == [words]
    body = {"dataset": staff_set.pk, "network": "lenet", "gpus": "cpu", "priority": 101}
    assert client.post(reverse("api-runs"), body, content_type="application/json").json() == {"priority": [words]}
    run = Run.objects.create(owner=owner, dataset=staff_set, name="r", network="lenet", config={})
    patch = client.patch(reverse("api-run", args=[run.pk]), {"priority": 101}, content_type="application/json")
    assert patch.json() == {"priority": [words]}
    queue_page = client.post(reverse("run-priority", args=[run.pk]), {"priority": "101"}, follow=True)
    assert f"Priority: {words}." in queue_page.content.decode()
    with pytest.raises(CommandError, match=f"^priority: {words}$"):
        _cli("--dataset", str(staff_set.pk), "--network", "lenet", "--gpus", "cpu", "--priority", "101")
    assert not Run.objects.exclude(pk=run.pk).exists()


def test_it_lets_only_staff_set_a_priority_through_the_api_and_sweeps(owner_client, dataset):
    body = {"dataset": dataset.pk, "network": "lenet", "gpus": "cpu", "priority": 5}
    for name, extra in (("api-runs", {}), ("api-sweeps", {"sweep": {"lr": [0.1, 0.01]}})):
        answer = owner_client.post(reverse(name), {**body, **extra}, content_type="application/json")
        assert answer.status_code == 403 and answer.json() == {"detail": "only staff can set a priority"}
    assert (
        owner_client.post(reverse("api-runs"), {**body, "priority": 0}, content_type="application/json").status_code
        == 201
    )
