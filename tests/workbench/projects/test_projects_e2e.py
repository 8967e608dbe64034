"""Projects in Chromium, the lab's path through every page it touches: staff create a project with
an admin and give it a quota; the admin adds a viewer and shares a dataset from its page; the
viewer finds it under "Shared with me", starts a run on it that waits with the quota's reason,
and is refused the admin's abort; a stranger gets 404 for all of it; the audit page shows each step."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from tests.support.trainer_data import make_dataset_folder
from workbench.projects.models import Project
from workbench.projects.quotas import record_use
from workbench.runs.devices import DeviceRequest
from workbench.runs.models import Run
from workbench.runs.services import run_create
from workbench.workers.simulation import simulate_hosts

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_it_shares_a_dataset_in_a_project_with_a_quota_roles_and_an_audit_trail(
    live_server_url, celery_worker, page, owner, other_user, staff_user, django_user_model
):
    stranger = django_user_model.objects.create_user("dave", "dave@example.com", "dave-password")
    dataset = make_dataset_row(
        owner, name="street scenes", image_width=8, image_height=8, channels=1,
        labels=["0", "1", "2"], splits={"train": {"count": 240}, "val": {"count": 60}},
    )  # fmt: skip
    make_dataset_folder(dataset.path)
    simulate_hosts(hosts=1, gpus_per_host=2, prefix="lab")

    log_in(page, live_server_url, staff_user.username)
    page.goto(f"{live_server_url}{reverse('project-list')}")
    page.fill("#id_name", "vision-lab")
    page.fill("#id_admins", owner.username)
    page.click("#project-form button[type=submit]")
    page.wait_for_url(f"{live_server_url}/projects/vision-lab/")
    page.wait_for_selector(f'[data-member="{owner.username}"]')
    page.fill("#quota-form [name=gpu_hours]", "1")
    page.click("#quota-form button[type=submit]")
    page.wait_for_selector("#project-quota .quota-words >> text=0.0 / 1")
    # Alice's earlier runs in the project spent it: 2 GPUs for an hour.
    lab = Project.objects.get(slug="vision-lab")
    an_hour_ago = timezone.now() - timedelta(hours=1, minutes=1)
    record_use(owner_id=owner.pk, project_id=lab.pk, job_kind="run", job_id=0, gpus=2, start=an_hour_ago,
               end=an_hour_ago + timedelta(hours=1))  # fmt: skip

    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/projects/vision-lab/")
    page.fill("#id_username", other_user.username)
    page.select_option("#id_role", "viewer")
    page.click("#member-form button[type=submit]")
    page.wait_for_selector(f'[data-member="{other_user.username}"]')
    assert "bob is now a viewer of vision-lab." in page.inner_text(".messages")
    page.goto(f"{live_server_url}{reverse('dataset-detail', args=[dataset.pk])}")
    page.select_option("#share-project", "vision-lab")
    page.click("#share-button")
    page.wait_for_selector("text=is now shared in project vision-lab")
    dataset.refresh_from_db()
    # Alice's run on it, queued (eight GPUs: no worker of the suite has them, nothing moves it).
    alices = run_create(owner=owner, dataset=dataset, name="alice's", network="lenet", config={"epochs": 3},
                        device_request=DeviceRequest.gpus(8))  # fmt: skip
    assert Run.objects.get(pk=alices.pk).project_id == lab.pk  # a run on a project's dataset joins it

    log_in(page, live_server_url, other_user.username)
    page.goto(f"{live_server_url}{reverse('dataset-list')}")
    page.click(".sharing-filter >> text=Shared with me")
    page.wait_for_url("**/datasets/?shared=1")
    assert "street scenes" in page.inner_text(".dataset-table")
    # Bob trains on it: his run is his, in the project, and waits for the project's quota.
    page.goto(f"{live_server_url}/runs/new/?dataset={dataset.pk}")
    page.wait_for_selector("#network-table[data-fits=done]", state="attached", timeout=90_000)
    page.check("#network-lenet")
    page.check("#id_device_mode input[value=count]")
    page.fill("#id_name", "bob's")
    page.click("#create-run")
    page.wait_for_url("**/runs/*/")
    bobs = Run.objects.get(name="bob's")
    assert (bobs.owner_id, bobs.project_id) == (other_user.pk, lab.pk)
    page.wait_for_selector("text=/over quota: 2\\.[0-9] of 1 GPU-hours this month for project vision-lab/")
    # ... and may not abort Alice's.
    page.goto(f"{live_server_url}/runs/{alices.pk}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#run-abort")
    page.wait_for_selector("text=/a viewer of project vision-lab: only the owner/")
    assert Run.objects.get(pk=alices.pk).state in (Run.State.QUEUED, Run.State.WAITING)  # not aborted

    log_in(page, live_server_url, stranger.username)
    for path in (reverse("dataset-detail", args=[dataset.pk]), f"/runs/{alices.pk}/", f"/runs/{bobs.pk}/",
                 "/projects/vision-lab/"):  # fmt: skip
        assert page.goto(f"{live_server_url}{path}").status == 404, path

    log_in(page, live_server_url, staff_user.username)
    page.goto(f"{live_server_url}/audit/")
    trail = page.inner_text("main")
    for step in ("vision-lab", "quota", "bob", "street scenes", "bob's"):
        assert step in trail, (step, trail[:2000])
