"""The GPU-hour quotas on the pages: used / allowed on Home (the user's own and their projects')
and on the project page, the staff's form there and their page of every quota."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.support.factories import make_dataset_row
from tests.workbench.projects.test_quotas import _ran
from workbench.projects.models import Quota

pytestmark = pytest.mark.django_db


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _quota_words(html: str) -> list[str]:
    """Each quota's words as a page writes them, "<used> / <allowed> GPU-hours <period> for <holder>",
    sorted (the database puts a user's quota, of no project, first or last)."""
    return sorted(part.split("</p>")[0] for part in html.split('<p class="quota-words">')[1:])


def test_it_shows_a_users_quota_and_their_projects_on_home(owner, viewer, other_user, staff_user, project):
    Quota.objects.create(user=owner, gpu_hours=10)
    Quota.objects.create(project=project, gpu_hours=40.5, period=Quota.Period.ROLLING, window_days=7)
    Quota.objects.create(user=other_user, gpu_hours=3)
    html = _as(owner).get(reverse("home")).content.decode()
    assert 'id="home-gpu-hours"' in html
    assert _quota_words(html) == [
        "<strong>0.0 / 10</strong> GPU-hours this month for user alice",
        "<strong>0.0 / 40.5</strong> GPU-hours in the last 7 days for project vision-lab",
    ]
    assert 'aria-label="GPU-hours used this month for user alice"' in html and "<meter" in html
    # A member sees the project's alone; staff, in no project and with no quota, see none on Home.
    assert _quota_words(_as(viewer).get(reverse("home")).content.decode()) == [
        "<strong>0.0 / 40.5</strong> GPU-hours in the last 7 days for project vision-lab"
    ]
    assert 'id="home-gpu-hours"' not in _as(staff_user).get(reverse("home")).content.decode()


def test_it_shows_the_gpu_hours_used_and_when_a_spent_quota_allows_again(owner, viewer, project):
    # alice's run in the project held 2 GPUs for 1.5 hours, ending now: 3 GPU-hours of 2 allowed.
    _ran(owner, make_dataset_row(owner, project=project), gpus=2, hours=1.5, project=project)
    Quota.objects.create(project=project, gpu_hours=2, period=Quota.Period.ROLLING, window_days=7)
    for url in (reverse("home"), reverse("project-detail", args=["vision-lab"])):
        html = _as(viewer).get(url).content.decode()
        assert _quota_words(html) == ["<strong>3.0 / 2</strong> GPU-hours in the last 7 days for project vision-lab"]
        assert 'max="2.0" value="3.0"' in html and "spent: allowed again 20" in html, url


def test_it_shows_nothing_on_home_without_a_quota(owner, project):
    assert 'id="home-gpu-hours"' not in _as(owner).get(reverse("home")).content.decode()


def test_it_says_when_a_spent_quota_allows_again(owner, project):
    Quota.objects.create(project=project, gpu_hours=0)
    for url in (reverse("home"), reverse("project-detail", args=["vision-lab"])):
        html = _as(owner).get(url).content.decode()
        assert "GPU-hours this month for project vision-lab" in html and "spent: allowed again 20" in html, url


def test_it_shows_the_projects_quota_to_its_members_without_the_form(viewer, project):
    url = reverse("project-detail", args=["vision-lab"])
    assert 'id="project-quota"' not in _as(viewer).get(url).content.decode()  # no quota, nothing to say
    Quota.objects.create(project=project, gpu_hours=40)
    html = _as(viewer).get(url).content.decode()
    assert _quota_words(html) == ["<strong>0.0 / 40</strong> GPU-hours this month for project vision-lab"]
    assert 'id="quota-form"' not in html and "Clear the quota" not in html


def test_it_lets_staff_set_and_clear_a_projects_quota_from_its_page(staff_user, project):
    client, page = _as(staff_user), reverse("project-detail", args=["vision-lab"])
    html = client.get(page).content.decode()
    assert 'id="quota-form"' in html and 'id="no-quota"' in html
    fields = {"gpu_hours": "25", "period": "rolling", "window_days": "14"}
    answer = client.post(reverse("project-quota-set", args=["vision-lab"]), fields, follow=True)
    assert answer.redirect_chain == [(page, 302)]
    html = answer.content.decode()
    assert "Quota set: 25 GPU-hours per rolling window for project vision-lab." in html
    assert _quota_words(html) == ["<strong>0.0 / 25</strong> GPU-hours in the last 14 days for project vision-lab"]
    quota = Quota.objects.get(project=project)
    assert (quota.gpu_hours, quota.period, quota.window_days, quota.set_by) == (25, "rolling", 14, staff_user)
    assert 'name="gpu_hours" value="25"' in html  # the form shows the quota to change
    answer = client.post(reverse("project-quota-clear", args=["vision-lab"]), follow=True)
    assert answer.redirect_chain == [(page, 302)]
    assert "The quota of project vision-lab was cleared" in answer.content.decode()
    assert not Quota.objects.filter(project=project).exists()
    answer = client.post(reverse("project-quota-clear", args=["vision-lab"]), follow=True)
    assert "No quota was cleared: there is no quota to clear." in answer.content.decode()


def test_it_shows_a_bad_value_on_the_projects_quota_form(staff_user, project):
    url = reverse("project-quota-set", args=["vision-lab"])
    answer = _as(staff_user).post(url, {"gpu_hours": "-3", "period": "month", "window_days": "30"})
    html = answer.content.decode()
    assert answer.status_code == 400 and 'id="quota-form"' in html
    assert "&#x27;-3&#x27;: give GPU-hours from 0 to 10,000,000" in html.split('id="errors-gpu_hours"')[1][:200]
    answer = _as(staff_user).post(url, {"gpu_hours": "5", "period": "rolling", "window_days": "400"})
    assert answer.status_code == 400 and "400 days: give 1 to 366" in answer.content.decode()
    assert not Quota.objects.exists()


@pytest.mark.parametrize("who", ["owner", "viewer", "other_user"])
def test_it_refuses_quota_changes_by_non_staff(request, who, owner, project):
    Quota.objects.create(user=owner, gpu_hours=10)
    client = _as(request.getfixturevalue(who))
    fields = {"gpu_hours": "99", "period": "month", "window_days": "30"}
    assert client.post(reverse("project-quota-set", args=["vision-lab"]), fields).status_code == 403
    assert client.post(reverse("project-quota-clear", args=["vision-lab"])).status_code == 403
    assert client.post(reverse("project-quotas"), {"username": "alice", **fields}).status_code == 403
    assert client.post(reverse("project-quotas-clear"), {"user": "alice"}).status_code == 403
    assert list(Quota.objects.values_list("gpu_hours", flat=True)) == [10]


@pytest.mark.parametrize("who", ["owner", "viewer", "other_user"])
def test_it_answers_403_to_the_quotas_page_for_non_staff(request, who, project):
    assert _as(request.getfixturevalue(who)).get(reverse("project-quotas")).status_code == 403


def test_it_links_the_quotas_page_from_the_project_list_for_staff_alone(owner, staff_user, project):
    assert 'href="/projects/quotas/"' in _as(staff_user).get(reverse("project-list")).content.decode()
    assert 'href="/projects/quotas/"' not in _as(owner).get(reverse("project-list")).content.decode()


def test_it_lists_every_quota_and_lets_staff_set_and_clear_a_users(staff_user, owner, other_user, project):
    Quota.objects.create(project=project, gpu_hours=40)
    client, page = _as(staff_user), reverse("project-quotas")
    assert reverse("project-quotas") == "/projects/quotas/"
    fields = {"username": "bob", "gpu_hours": "12.5", "period": "month", "window_days": ""}
    answer = client.post(page, fields, follow=True)
    assert answer.redirect_chain == [(page, 302)]
    html = answer.content.decode()
    assert "Quota set: 12.5 GPU-hours per calendar month for user bob." in html
    assert _quota_words(html) == [
        "<strong>0.0 / 12.5</strong> GPU-hours this month for user bob",
        "<strong>0.0 / 40</strong> GPU-hours this month for project vision-lab",
    ]
    assert Quota.objects.get(user=other_user).set_by == staff_user
    answer = client.post(reverse("project-quotas-clear"), {"user": "bob"}, follow=True)
    assert answer.redirect_chain == [(page, 302)]
    assert "The quota of user bob was cleared" in answer.content.decode()
    answer = client.post(reverse("project-quotas-clear"), {"project": "vision-lab"}, follow=True)
    assert "The quota of project vision-lab was cleared" in answer.content.decode()
    assert not Quota.objects.exists() and 'id="no-quotas"' in answer.content.decode()


def test_it_shows_a_refusal_on_the_quotas_page_form(staff_user):
    answer = _as(staff_user).post(reverse("project-quotas"), {"username": "zed", "gpu_hours": "5", "period": "month"})
    html = answer.content.decode()
    assert answer.status_code == 400 and "no user named &#x27;zed&#x27;" in html.split('id="errors-username"')[1][:200]
    fields = {"username": "carol", "gpu_hours": "lots", "period": "month"}
    answer = _as(staff_user).post(reverse("project-quotas"), fields)
    html = answer.content.decode()
    assert answer.status_code == 400 and "&#x27;lots&#x27; is not a number of GPU-hours" in html
    assert not Quota.objects.exists()
