"""The run page's Pause, Resume and Abort: drawn as the run's state allows from the first paint
(they were all shown until the page's script ran)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.support.factories import make_dataset_row
from workbench.runs.models import Run
from workbench.runs.services import run_create


def shown_actions(client, run: Run) -> dict[str, bool]:
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    return {
        name: " hidden" not in page.split(f'id="run-{name}"')[1].split(">")[0] for name in ("pause", "resume", "abort")
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("state", "offered"),
    [
        (Run.State.QUEUED, {"pause": True, "resume": False, "abort": True}),
        (Run.State.RUNNING, {"pause": True, "resume": False, "abort": True}),
        (Run.State.PAUSED, {"pause": False, "resume": True, "abort": True}),
        (Run.State.DONE, {"pause": False, "resume": False, "abort": False}),
        (Run.State.ABORTED, {"pause": False, "resume": False, "abort": False}),
    ],
)
def test_it_draws_the_actions_the_runs_state_allows(owner, owner_client, state, offered):
    dataset = make_dataset_row(owner, status="building")
    run = run_create(owner=owner, dataset=dataset, name="r", network="lenet", config={}, device_request={"kind": "cpu"})
    Run.objects.filter(pk=run.pk).update(state=state)
    assert shown_actions(owner_client, run) == offered
