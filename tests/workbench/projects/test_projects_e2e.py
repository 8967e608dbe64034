"""Projects in Chromium, one path through every page they touch: staff create a project with an
admin, the admin adds a viewer and shares a dataset from its page, the viewer finds it under
"Shared with me"."""

from __future__ import annotations

import pytest
from django.urls import reverse

from datasets.models import Dataset
from tests.conftest import log_in
from tests.support.factories import make_dataset_row

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_it_creates_a_project_adds_a_viewer_and_shares_a_dataset_with_them(
    live_server_url, page, owner, other_user, staff_user
):
    dataset = make_dataset_row(owner, name="street scenes", status=Dataset.Status.BUILDING)

    log_in(page, live_server_url, staff_user.username)
    page.goto(f"{live_server_url}{reverse('project-list')}")
    page.fill("#id_name", "vision-lab")
    page.fill("#id_admins", owner.username)
    page.click("#project-form button[type=submit]")
    page.wait_for_url(f"{live_server_url}/projects/vision-lab/")
    page.wait_for_selector(f'[data-member="{owner.username}"]')

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

    log_in(page, live_server_url, other_user.username)
    page.goto(f"{live_server_url}{reverse('dataset-list')}")
    page.click(".sharing-filter >> text=Shared with me")
    page.wait_for_url("**/datasets/?shared=1")
    assert "street scenes" in page.inner_text(".dataset-table")
