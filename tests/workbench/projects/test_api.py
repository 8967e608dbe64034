"""The projects' API: create (staff), members (admins), share (owners), the lists' filters, and
the roles on every door of a shared object: a viewer uses it and is refused changing it, a
non-member gets 404 on each id-bearing URL."""

from __future__ import annotations

import pytest
from django.test import Client

from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from workbench.projects.models import Membership, Project
from workbench.runs.models import Run

pytestmark = pytest.mark.django_db


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _post(client: Client, url: str, body: dict):
    return client.post(url, body, content_type="application/json")


def test_it_lets_staff_create_a_project_with_its_first_admins(staff_user, owner, other_user):
    response = _post(_as(staff_user), "/api/projects/", {"name": "Vision lab", "admins": ["alice"]})
    assert response.status_code == 201, response.content
    assert response.json()["slug"] == "vision-lab"
    assert Membership.objects.get(project__slug="vision-lab").user == owner
    refused = _post(_as(other_user), "/api/projects/", {"name": "Mine"})
    assert refused.status_code == 403 and "only staff" in refused.json()["detail"]
    again = _post(_as(staff_user), "/api/projects/", {"name": "Vision lab"})
    assert again.status_code == 400 and "exists already" in again.json()["slug"][0]
    reserved = _post(_as(staff_user), "/api/projects/", {"name": "Share"})
    assert reserved.status_code == 400 and "names a page" in reserved.json()["slug"][0]
    unknown = _post(_as(staff_user), "/api/projects/", {"name": "X", "admins": ["nobody"]})
    assert unknown.status_code == 400 and "no user named 'nobody'" in unknown.json()["user"][0]


def test_it_lists_a_users_projects_with_their_role(owner, viewer, other_user, project):
    assert [(p["slug"], p["role"]) for p in _as(viewer).get("/api/projects/").json()["results"]] == [
        ("vision-lab", "viewer")
    ]
    assert _as(other_user).get("/api/projects/").json()["results"] == []
    assert _as(other_user).get("/api/projects/vision-lab/").status_code == 404
    members = _as(viewer).get("/api/projects/vision-lab/").json()["members"]
    assert {m["user"]: m["role"] for m in members} == {"alice": "admin", "eddie": "editor", "vic": "viewer"}


def test_it_lets_admins_alone_manage_members(owner, viewer, editor, other_user, project):
    url = "/api/projects/vision-lab/members/"
    for member in (viewer, editor):
        refused = _post(_as(member), url, {"user": "bob", "role": "viewer"})
        assert refused.status_code == 403 and "admins" in refused.json()["detail"]
    assert _post(_as(other_user), url, {"user": "bob"}).status_code == 404
    added = _post(_as(owner), url, {"user": "bob", "role": "editor"})
    assert added.status_code == 200 and added.json() == {"user": "bob", "role": "editor"}
    bad = _post(_as(owner), url, {"user": "bob", "role": "boss"})
    assert bad.status_code == 400 and "not a role" in bad.json()["role"][0]
    assert _as(owner).delete(f"{url}bob/").status_code == 204
    assert not Membership.objects.filter(user=other_user).exists()
    last = _as(owner).delete(f"{url}alice/")
    assert last.status_code == 400 and "last admin" in last.json()["user"][0]


def test_it_shares_only_what_the_user_owns_into_a_project_of_theirs(owner, viewer, other_user, project):
    dataset = make_dataset_row(owner, name="digits")
    body = {"kind": "dataset", "id": dataset.pk, "project": "vision-lab"}
    assert _post(_as(other_user), "/api/share/", body).status_code == 404
    shared = _post(_as(owner), "/api/share/", body)
    assert shared.status_code == 200 and shared.json()["project"] == "vision-lab"
    refused = _post(_as(viewer), "/api/share/", {**body, "project": None})
    assert refused.status_code == 403 and "only the owner" in refused.json()["detail"]
    Project.objects.create(name="Other", slug="other")
    elsewhere = _post(_as(owner), "/api/share/", {**body, "project": "other"})
    assert elsewhere.status_code == 400 and "no project 'other' of yours" in elsewhere.json()["project"][0]
    bad_kind = _post(_as(owner), "/api/share/", {**body, "kind": "host"})
    assert bad_kind.status_code == 400
    assert _post(_as(owner), "/api/share/", {**body, "project": None}).json()["project"] is None
    assert Dataset.objects.get(pk=dataset.pk).project is None


def test_it_filters_every_list_by_project_and_by_shared_with_me(owner, viewer, shared_work):
    make_dataset_row(viewer, name="vics-own")
    client = _as(viewer)
    for url, key in [("/api/datasets/", "results"), ("/api/runs/", "results"), ("/api/searches/", "results"),
                     ("/api/benchmarks/", "results")]:  # fmt: skip
        rows = client.get(url, {"shared": "1"}).json()[key]
        assert [row["project"] for row in rows] == ["vision-lab"], url
        assert len(client.get(url, {"project": "vision-lab"}).json()[key]) == 1, url
    assert len(client.get("/api/datasets/").json()["results"]) == 2
    assert client.get("/api/runs/", {"project": "nope"}).status_code == 404


def test_it_lets_a_viewer_read_and_refuses_every_change_with_the_reason(viewer, editor, other_user, shared_work):
    run, dataset, search, benchmark = (shared_work[k] for k in ("run", "dataset", "search", "benchmark"))
    reads = [f"/api/runs/{run.pk}/", f"/api/datasets/{dataset.pk}/", f"/api/searches/{search.pk}/",
             f"/api/benchmarks/{benchmark.pk}/"]  # fmt: skip
    changes = [
        ("post", f"/api/runs/{run.pk}/abort/"), ("post", f"/api/runs/{run.pk}/pause/"),
        ("post", f"/api/runs/{run.pk}/resume/"), ("delete", f"/api/runs/{run.pk}/"),
        ("delete", f"/api/datasets/{dataset.pk}/"), ("post", f"/api/datasets/{dataset.pk}/cancel/"),
        ("post", f"/api/datasets/{dataset.pk}/rebuild/"), ("post", f"/api/searches/{search.pk}/abort/"),
        ("post", f"/api/searches/{search.pk}/pause/"), ("post", f"/api/searches/{search.pk}/train-best/"),
        ("post", f"/api/benchmarks/{benchmark.pk}/cancel/"),
    ]  # fmt: skip
    for url in reads:
        assert _as(viewer).get(url).status_code == 200, url
        assert _as(other_user).get(url).status_code == 404, url
    for method, url in changes:
        answer = getattr(_as(viewer), method)(url, content_type="application/json")
        assert answer.status_code == 403, (method, url, answer.status_code)
        assert "you are a viewer of project vision-lab" in answer.json()["detail"], url
        assert getattr(_as(other_user), method)(url, content_type="application/json").status_code == 404, url
    aborted = _as(editor).post(f"/api/runs/{run.pk}/abort/")
    assert aborted.status_code == 200, aborted.content
    assert Run.objects.get(pk=run.pk).state == Run.State.ABORTED


def test_it_names_whose_runs_keep_a_shared_dataset(owner, viewer, other_user, project):
    dataset = make_dataset_row(owner, name="digits", project=project)
    for n in range(2):
        Run.objects.create(owner=viewer, name=f"v{n}", dataset=dataset, network="lenet")
    Run.objects.create(owner=owner, name="mine", dataset=dataset, network="lenet")
    refused = _as(owner).delete(f"/api/datasets/{dataset.pk}/")
    assert refused.status_code == 409
    assert refused.json()["detail"] == "3 runs use this dataset (2 of vic, 1 of alice); they must be deleted first"
