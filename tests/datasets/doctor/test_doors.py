"""The doors to a dataset's duplicates report: the API (read, ask for a check), the command line,
the dataset page; whoever may see the dataset may ask, a stranger gets 404; each check is audited.
The check itself by a real worker, asked through the API."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from tests.support.waiting import wait_until
from workbench.audit.models import AuditEntry

pytestmark = pytest.mark.django_db


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _url(dataset) -> str:
    return f"/api/datasets/{dataset.pk}/duplicates/"


def test_it_checks_from_the_command_line_and_shows_the_leak_on_the_page_and_in_the_api(owner, leaky_dataset):
    assert _as(owner).get(_url(leaky_dataset)).json() == {"state": "not checked", "report": None}
    out = StringIO()
    call_command("duplicates", leaky_dataset.pk, "--as", owner.username, stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        "42 images, 2 pairs of copies (1 exact), 1 across splits; per split pair: train-train: 1, train-val: 1"
    )
    assert lines[1] == "near  train 00000007_1 (label 1) ~ val 00000010_0 (label 0)"
    answer = _as(owner).get(_url(leaky_dataset)).json()
    assert answer["state"] == "done" and answer["report"]["leaks"] == 1
    page = _as(owner).get(f"/datasets/{leaky_dataset.pk}/").content.decode()
    assert '<strong id="duplicates-leaks">1 across splits</strong>' in page
    assert page.count('<img src="data:image/png;base64,') >= 4  # both pairs, side by side
    assert AuditEntry.objects.filter(action="dataset.check_duplicates", actor_name=owner.username).count() == 1


def test_it_answers_a_stranger_404_at_every_door(other_user, leaky_dataset):
    stranger = _as(other_user)
    assert stranger.get(_url(leaky_dataset)).status_code == 404
    assert stranger.post(_url(leaky_dataset)).status_code == 404
    assert stranger.post(f"/datasets/{leaky_dataset.pk}/duplicates/").status_code == 404
    with pytest.raises(CommandError, match=f"^no dataset {leaky_dataset.pk} that bob may see$"):
        call_command("duplicates", leaky_dataset.pk, "--as", other_user.username)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_has_a_worker_check_the_dataset_when_asked(celery_worker, owner, leaky_dataset):
    asked = _as(owner).post(_url(leaky_dataset))
    assert asked.status_code == 202 and asked.json()["state"] == "checking"
    assert _as(owner).post(_url(leaky_dataset)).json()["state"] == "checking"  # asked twice: one check
    state = lambda: _as(owner).get(_url(leaky_dataset)).json()  # noqa: E731
    wait_until(lambda: state()["state"] == "done", what=lambda: f"the worker's report: {state()}", timeout=60)
    assert _as(owner).get(_url(leaky_dataset)).json()["report"]["counts"] == {"train-train": 1, "train-val": 1}
    assert AuditEntry.objects.filter(action="dataset.check_duplicates", door="api").count() == 1
