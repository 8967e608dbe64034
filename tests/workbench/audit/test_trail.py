"""The audit trail: what each door records (who, when, from where, before and after), sign-in
and its failures, and reading it (staff only: page, API, command)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from tests.conftest import PASSWORD
from tests.support.factories import make_dataset_row
from workbench.audit import context
from workbench.audit.models import AuditEntry
from workbench.projects.models import Membership, Project
from workbench.runs.models import Run

pytestmark = pytest.mark.django_db


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_records_an_abort_from_the_api_with_who_where_and_the_states(owner):
    run = Run.objects.create(owner=owner, name="r", dataset=make_dataset_row(owner), network="lenet")
    assert _as(owner).post(f"/api/runs/{run.pk}/abort/").status_code == 200
    entry = AuditEntry.objects.get(action="run.abort")
    assert (entry.actor, entry.actor_name, entry.door, entry.address) == (owner, "alice", "api", "127.0.0.1")
    assert (entry.target_kind, entry.target_id, entry.target_name, entry.outcome) == ("run", str(run.pk), "r", "done")
    assert entry.before == {"state": "queued", "stop_request": ""}
    assert entry.after == {"state": "aborted", "stop_request": ""}


def test_it_records_a_refused_change_with_its_status(owner, other_user):
    run = Run.objects.create(owner=owner, name="r", dataset=make_dataset_row(owner), network="lenet")
    assert _as(other_user).post(f"/api/runs/{run.pk}/abort/").status_code == 404
    entry = AuditEntry.objects.exclude(action="signin").get()
    assert (entry.actor_name, entry.action, entry.target_id, entry.outcome) == ("bob", "run.abort", str(run.pk), "404")


def test_it_records_a_page_action_as_the_pages(owner):
    run = Run.objects.create(owner=owner, name="r", dataset=make_dataset_row(owner), network="lenet")
    _as(owner).post(f"/runs/{run.pk}/abort/")
    assert AuditEntry.objects.get(action="run.abort").door == "page"


def test_it_records_sign_in_and_its_failures_with_the_name_tried(owner):
    client = Client()
    client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    client.post("/accounts/login/", {"username": "alice", "password": PASSWORD})
    assert _as(owner) is not None
    rows = [(e.action, e.actor_name, e.outcome, e.door) for e in AuditEntry.objects.order_by("pk")]
    assert rows[:2] == [("signin.failed", "alice", "refused", "page"), ("signin", "alice", "done", "page")]
    token = Client().post("/api/auth/token/", {"username": "alice", "password": "nope"})
    assert token.status_code == 400
    assert AuditEntry.objects.filter(action="signin.failed", door="api").exists()


def test_it_records_membership_and_sharing_with_before_and_after(owner, staff_user, other_user):
    staff = _as(staff_user)
    staff.post("/api/projects/", {"name": "Lab", "admins": ["alice"]}, content_type="application/json")
    _as(owner).post("/api/projects/lab/members/", {"user": "bob", "role": "viewer"}, content_type="application/json")
    _as(owner).post("/api/projects/lab/members/", {"user": "bob", "role": "editor"}, content_type="application/json")
    dataset = make_dataset_row(owner)
    body = {"kind": "dataset", "id": dataset.pk, "project": "lab"}
    _as(owner).post("/api/share/", body, content_type="application/json")
    changes = [(e.action, e.before, e.after) for e in AuditEntry.objects.exclude(action="signin").order_by("pk")]
    assert changes[0][0] == "project.create" and changes[0][2]["admins"] == ["alice"]
    assert changes[1:] == [
        ("project.member_set", None, {"user": "bob", "role": "viewer"}),
        ("project.member_set", {"user": "bob", "role": "viewer"}, {"user": "bob", "role": "editor"}),
        ("dataset.share", {"project": None}, {"project": "lab"}),
    ]


def test_it_shows_the_trail_to_staff_alone_with_filters(owner, staff_user):
    run = Run.objects.create(owner=owner, name="r", dataset=make_dataset_row(owner), network="lenet")
    _as(owner).post(f"/api/runs/{run.pk}/abort/")
    assert _as(owner).get("/api/audit/").status_code == 403
    assert _as(owner).get("/audit/").status_code == 403
    staff = _as(staff_user)
    found = staff.get("/api/audit/", {"action": "run.", "user": "alice"}).json()["results"]
    assert [(row["action"], row["target"]["id"]) for row in found] == [("run.abort", str(run.pk))]
    assert staff.get("/api/audit/", {"action": "dataset."}).json()["results"] == []
    assert "since" in staff.get("/api/audit/", {"since": "yesterday"}).json()
    page = staff.get("/audit/", {"kind": "run"}).content.decode()
    assert "run.abort" in page and "alice" in page


def test_it_prints_the_trail_from_the_shell(owner, staff_user):
    run = Run.objects.create(owner=owner, name="r", dataset=make_dataset_row(owner), network="lenet")
    call_command("abort_run", str(run.pk), "--as", "alice", stdout=StringIO())
    out = StringIO()
    call_command("audit", "--as", "carol", "--action", "run.abort", stdout=out)
    assert "alice" in out.getvalue() and f"run.abort  run {run.pk} r  done" in out.getvalue()


def test_it_tells_a_typed_command_from_the_workbench_itself(monkeypatch):
    monkeypatch.setattr(context, "_declared", None)
    monkeypatch.setattr("sys.argv", ["/srv/workbench/manage.py", "abort_run", "3"])
    assert context.process_door() == "cli"
    monkeypatch.setattr("sys.argv", ["celery", "worker"])
    assert context.process_door() == "system"
    monkeypatch.setattr("sys.argv", ["manage.py", "runworkbench"])
    context.declare_door("system")
    assert context.process_door() == "system"


def test_it_records_sign_out_and_never_a_signed_out_request_of_its_own(owner):
    client = Client()
    client.post("/accounts/login/", {"username": "alice", "password": PASSWORD})
    client.post("/accounts/logout/")
    assert AuditEntry.objects.filter(action="signout", actor_name="alice").exists()
    before = AuditEntry.objects.count()
    Client().post("/runs/1/abort/")  # signed out: sent to the login page, nothing of its own kept
    assert AuditEntry.objects.count() == before


def test_it_keeps_no_secret_of_the_notice_settings(owner):
    hook = "https://hooks.slack.example/services/T000/B000/XXXXSECRET"
    body = {
        "webhook_url": hook,
        "webhook_secret": "a secret of 32 characters, really",
        "apprise_url": "json://u:pw@host/x",
    }
    assert _as(owner).put("/api/notices/settings/", body, content_type="application/json").status_code == 200
    entry = AuditEntry.objects.get(action="notices.settings")
    assert "SECRET" not in str(entry.after) and "pw@" not in str(entry.after) and "really" not in str(entry.after)
    assert entry.after["webhook_url"] == "https://hooks.slack.example/..."


def test_it_names_the_user_who_acted_not_the_owner_of_what_they_acted_on(owner, other_user):
    project = Project.objects.create(name="p", slug="p")
    Membership.objects.create(project=project, user=other_user, role="editor")
    run = Run.objects.create(owner=owner, name="r", dataset=make_dataset_row(owner), network="lenet", project=project)
    assert _as(other_user).post(f"/api/runs/{run.pk}/abort/").status_code == 200
    assert AuditEntry.objects.get(action="run.abort").actor_name == "bob"
