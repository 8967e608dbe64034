"""`manage.py project`, `manage.py share` and `abort_run --as`: the API's rules from the shell."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.support.factories import make_dataset_row
from workbench.projects.models import Membership, Project
from workbench.runs.models import Run

pytestmark = pytest.mark.django_db


def _call(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_it_creates_a_project_and_manages_its_members(staff_user, owner, other_user):
    assert (
        _call("project", "--as", "carol", "create", "Vision lab", "--admin", "alice") == "project vision-lab created\n"
    )
    assert _call("project", "--as", "alice", "add-member", "vision-lab", "bob", "--role", "editor") == (
        "bob is an editor of vision-lab\n"
    )
    assert "vision-lab  Vision lab  role: editor  holds: 0 datasets" in _call("project", "--as", "bob", "list")
    with pytest.raises(CommandError, match="you are an editor of project vision-lab: only its admins and staff"):
        _call("project", "--as", "bob", "remove-member", "vision-lab", "alice")
    with pytest.raises(CommandError, match="only staff create projects"):
        _call("project", "--as", "alice", "create", "Mine")
    with pytest.raises(CommandError, match="invalid choice: 'boss'"):
        _call("project", "--as", "alice", "add-member", "vision-lab", "bob", "--role", "boss")
    assert _call("project", "--as", "alice", "remove-member", "vision-lab", "bob") == "bob removed from vision-lab\n"
    assert not Membership.objects.filter(user=other_user).exists()
    with pytest.raises(CommandError, match="--as: no user named 'zed'"):
        _call("project", "--as", "zed", "list")


def test_it_shares_from_the_shell_under_the_apis_rules(owner, viewer, other_user, project):
    dataset = make_dataset_row(owner, name="digits")
    assert _call("share", "dataset", str(dataset.pk), "vision-lab", "--as", "alice") == (
        f"dataset {dataset.pk} is now in project vision-lab\n"
    )
    with pytest.raises(CommandError, match="only the owner of this dataset"):
        _call("share", "dataset", str(dataset.pk), "--none", "--as", "vic")
    with pytest.raises(CommandError, match=f"no dataset {dataset.pk}"):
        _call("share", "dataset", str(dataset.pk), "--none", "--as", "bob")
    with pytest.raises(CommandError, match="give a project's slug, or --none"):
        _call("share", "dataset", str(dataset.pk), "--as", "alice")
    assert "is now its owner's alone" in _call("share", "dataset", str(dataset.pk), "--none", "--as", "alice")
    assert Project.objects.get().datasets.count() == 0


def test_it_refuses_a_viewer_aborting_a_shared_run_from_the_shell(owner, viewer, editor, other_user, project):
    run = Run.objects.create(
        owner=owner, name="r", dataset=make_dataset_row(owner, project=project), network="lenet", project=project
    )
    with pytest.raises(CommandError, match="you are a viewer of project vision-lab"):
        _call("abort_run", str(run.pk), "--as", "vic")
    with pytest.raises(CommandError, match=f"no run {run.pk}"):
        _call("abort_run", str(run.pk), "--as", "bob")
    assert _call("abort_run", str(run.pk), "--as", "eddie") == f"run {run.pk}: aborted\n"
