"""The project pages (list, one project, its members), the lists' "Shared with me" and
per-project filters, and the Project select of the dataset and run pages."""

from __future__ import annotations

import pytest
from django.urls import reverse

from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from workbench.benchmarks.models import Benchmark
from workbench.core.ownership import EDITOR, VIEWER
from workbench.projects.models import Membership, Project
from workbench.runs.services import run_create
from workbench.searches.models import Search

pytestmark = pytest.mark.django_db


def _as(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def holdings(owner, project):
    """alice's dataset, run, search and benchmark in the project, and one dataset of hers in none."""
    dataset = make_dataset_row(owner, name="shared cats", status=Dataset.Status.BUILDING, project=project)
    run = run_create(owner=owner, dataset=dataset, name="cat run", network="lenet", config={},
                     device_request={"kind": "cpu"})  # fmt: skip
    search = Search.objects.create(owner=owner, name="cat search", dataset=dataset, network="lenet", max_trials=2,
                                   study_name="pages-1", project=project)  # fmt: skip
    benchmark = Benchmark.objects.create(owner=owner, name="cat speed", request={}, project=project)
    private = make_dataset_row(owner, name="private dogs", status=Dataset.Status.BUILDING)
    return {"dataset": dataset, "run": run, "search": search, "benchmark": benchmark, "private": private}


def test_it_lists_a_members_projects_with_role_and_holdings(client, viewer, holdings):
    page = _as(client, viewer).get(reverse("project-list"))
    html = page.content.decode()
    assert page.status_code == 200
    assert 'href="/projects/vision-lab/"' in html and "<td>viewer</td>" in html
    assert "<td>1</td><td>1</td><td>1</td><td>1</td><td>0</td>" in html  # datasets, runs, searches, benchmarks, weights
    assert 'id="project-form"' not in html  # only staff create


def test_it_lists_no_project_for_a_non_member(client, other_user, project):
    html = _as(client, other_user).get(reverse("project-list")).content.decode()
    assert "vision-lab" not in html.replace('href="/projects/"', "") and 'id="no-projects"' in html


def test_it_lets_staff_create_a_project_with_its_admins(client, staff_user, owner):
    client = _as(client, staff_user)
    answer = client.post(reverse("project-list"), {"name": "Paper 2", "slug": "", "description": "", "admins": "alice"})
    assert answer.status_code == 302 and answer["Location"] == "/projects/paper-2/"
    project = Project.objects.get(slug="paper-2")
    assert list(project.memberships.values_list("user__username", "role")) == [("alice", "admin")]
    assert "Project “Paper 2” was created." in client.get(answer["Location"]).content.decode()


def test_it_shows_the_creation_refusals_on_the_form(client, staff_user, project):
    client = _as(client, staff_user)
    answer = client.post(reverse("project-list"), {"name": "Vision lab", "admins": "nobody"})
    html = answer.content.decode()
    assert answer.status_code == 400 and "no user named &#x27;nobody&#x27;" in html
    answer = client.post(reverse("project-list"), {"name": "Vision lab"})
    assert (
        answer.status_code == 400 and "a project named &#x27;vision-lab&#x27; exists already" in answer.content.decode()
    )


def test_it_refuses_creation_by_a_non_staff_user(client, owner):
    assert _as(client, owner).post(reverse("project-list"), {"name": "Mine"}).status_code == 403
    assert not Project.objects.filter(slug="mine").exists()


@pytest.mark.parametrize("who", ["owner", "viewer", "editor", "staff_user"])
def test_it_shows_the_project_page_to_members_and_staff(request, client, who, holdings):
    html = _as(client, request.getfixturevalue(who)).get(reverse("project-detail", args=["vision-lab"])).content
    html = html.decode()
    assert "Vision lab" in html and 'data-member="vic"' in html and "also manages the project&#x27;s members" in html
    for name, kind in [("dataset", "datasets"), ("run", "runs"), ("search", "searches"), ("benchmark", "benchmarks")]:
        assert f'href="/{kind}/{holdings[name].pk}/"' in html, name
    assert "private dogs" not in html
    manages = who in ("owner", "staff_user")
    assert ('id="member-form"' in html) is manages and ("Remove vic" in html) is manages


def test_it_answers_404_to_a_non_member(client, other_user, project):
    assert _as(client, other_user).get(reverse("project-detail", args=["vision-lab"])).status_code == 404
    assert _as(client, other_user).get(reverse("project-detail", args=["no-such"])).status_code == 404


def test_it_lets_an_admin_add_change_and_remove_a_member(client, owner, other_user, project):
    client = _as(client, owner)
    members = reverse("project-member-set", args=["vision-lab"])
    answer = client.post(members, {"username": "bob", "role": VIEWER}, follow=True)
    assert "bob is now a viewer of Vision lab." in answer.content.decode()
    answer = client.post(members, {"username": "bob", "role": EDITOR}, follow=True)
    assert "bob is now an editor of Vision lab." in answer.content.decode()
    assert Membership.objects.get(project=project, user=other_user).role == EDITOR
    answer = client.post(reverse("project-member-remove", args=["vision-lab"]), {"username": "bob"}, follow=True)
    assert "bob was removed from Vision lab" in answer.content.decode()
    assert not Membership.objects.filter(project=project, user=other_user).exists()


def test_it_shows_a_member_refusal_on_the_form(client, owner, project):
    answer = _as(client, owner).post(reverse("project-member-set", args=["vision-lab"]), {"username": "zed",
                                                                                          "role": VIEWER})  # fmt: skip
    assert answer.status_code == 400 and "no user named &#x27;zed&#x27;" in answer.content.decode()


@pytest.mark.parametrize("who", ["viewer", "editor"])
def test_it_refuses_member_changes_to_viewers_and_editors(request, client, who, other_user, project):
    client = _as(client, request.getfixturevalue(who))
    set_url, remove_url = (
        reverse(name, args=["vision-lab"]) for name in ("project-member-set", "project-member-remove")
    )
    assert client.post(set_url, {"username": "bob", "role": VIEWER}).status_code == 403
    assert client.post(remove_url, {"username": "vic"}).status_code == 403
    assert project.memberships.count() == 3


def test_it_answers_404_to_member_changes_by_a_non_member(client, other_user, project):
    url = reverse("project-member-set", args=["vision-lab"])
    assert _as(client, other_user).post(url, {"username": "bob", "role": VIEWER}).status_code == 404


@pytest.mark.parametrize("list_name", ["dataset-list", "run-list", "search-list", "benchmark-list"])
def test_it_filters_each_list_by_project_and_by_shared_with_me(request, client, list_name, owner, viewer, holdings):
    url = reverse(list_name)
    mine = {"dataset-list": "private dogs", "run-list": "mine alone", "search-list": "mine alone",
            "benchmark-list": "mine alone"}[list_name]  # fmt: skip
    shared = {"dataset-list": "shared cats", "run-list": "cat run", "search-list": "cat search",
              "benchmark-list": "cat speed"}[list_name]  # fmt: skip
    _a_row_in_no_project(list_name, owner, holdings["private"])
    own = _as(client, owner)
    assert mine in own.get(url).content.decode() and shared in own.get(url).content.decode()
    by_project = own.get(url, {"project": "vision-lab"}).content.decode()
    assert shared in by_project and mine not in by_project and 'href="/projects/vision-lab/"' in by_project
    assert shared not in own.get(url, {"shared": "1"}).content.decode()  # her own are not "shared with her"
    seen = _as(client, viewer).get(url, {"shared": "1"}).content.decode()
    assert shared in seen and mine not in seen
    assert _as(client, viewer).get(url, {"project": "no-such"}).status_code == 404


def _a_row_in_no_project(list_name: str, owner, dataset) -> None:
    if list_name == "run-list":
        run_create(owner=owner, dataset=dataset, name="mine alone", network="lenet", config={},
                   device_request={"kind": "cpu"})  # fmt: skip
    elif list_name == "search-list":
        Search.objects.create(owner=owner, name="mine alone", dataset=dataset, network="lenet", max_trials=2,
                              study_name="pages-2")  # fmt: skip
    elif list_name == "benchmark-list":
        Benchmark.objects.create(owner=owner, name="mine alone", request={})


def test_it_lets_the_owner_share_a_dataset_and_take_it_out(client, owner, holdings):
    dataset = holdings["private"]
    client = _as(client, owner)
    page = client.get(reverse("dataset-detail", args=[dataset.pk])).content.decode()
    assert 'id="share-form"' in page and '<option value="vision-lab">' in page
    url, back = reverse("project-share"), reverse("dataset-detail", args=[dataset.pk])
    answer = client.post(url, {"kind": "dataset", "id": dataset.pk, "project": "vision-lab", "next": back}, follow=True)
    assert answer.redirect_chain == [(back, 302)]
    assert "The dataset “private dogs” is now shared in project vision-lab." in answer.content.decode()
    dataset.refresh_from_db()
    assert dataset.project.slug == "vision-lab"
    answer = client.post(url, {"kind": "dataset", "id": dataset.pk, "project": "", "next": back}, follow=True)
    assert "is in no project now" in answer.content.decode()
    dataset.refresh_from_db()
    assert dataset.project is None


def test_it_lets_the_owner_share_a_run_from_its_page(client, owner, holdings):
    run = holdings["run"]
    client = _as(client, owner)
    assert 'id="share-form"' in client.get(reverse("run-detail", args=[run.pk])).content.decode()
    answer = client.post(reverse("project-share"), {"kind": "run", "id": run.pk, "project": ""})
    assert answer.status_code == 302 and answer["Location"] == reverse("run-detail", args=[run.pk])
    run.refresh_from_db()
    assert run.project is None


def test_it_shows_where_a_shared_object_is_and_refuses_a_viewers_share(client, viewer, holdings):
    dataset, run = holdings["dataset"], holdings["run"]
    client = _as(client, viewer)
    for url in (reverse("dataset-detail", args=[dataset.pk]), reverse("run-detail", args=[run.pk])):
        page = client.get(url).content.decode()
        assert 'id="share-form"' not in page
        assert 'Shared in <a href="/projects/vision-lab/">Vision lab</a>' in page
    answer = client.post(reverse("project-share"), {"kind": "dataset", "id": dataset.pk, "project": ""})
    assert answer.status_code == 403
    dataset.refresh_from_db()
    assert dataset.project_id == holdings["dataset"].project_id


def test_it_refuses_sharing_into_a_project_the_owner_is_not_in(client, other_user, project):
    dataset = make_dataset_row(other_user, name="bobs", status=Dataset.Status.BUILDING)
    answer = _as(client, other_user).post(reverse("project-share"), {"kind": "dataset", "id": dataset.pk,
                                                                     "project": "vision-lab"}, follow=True)  # fmt: skip
    assert "Nothing was shared: no project &#x27;vision-lab&#x27; of yours." in answer.content.decode()
    dataset.refresh_from_db()
    assert dataset.project is None


def test_it_links_the_projects_page_from_the_navigation(client, owner):
    html = _as(client, owner).get(reverse("home")).content.decode()
    assert '<a href="/projects/" >Projects</a>' in html
