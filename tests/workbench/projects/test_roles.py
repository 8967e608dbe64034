"""The roles' rule (workbench/core/ownership.py): who sees and who changes a row shared into a
project, for rows owned directly and through a parent, loaded or queried."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404

from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from workbench.benchmarks.models import Benchmark, BenchmarkCell
from workbench.core.ownership import VIEWER, project_path, row_to_change
from workbench.inference.models import InferenceJob
from workbench.projects.models import Membership

pytestmark = pytest.mark.django_db


@pytest.fixture
def shared(owner, project):
    """alice's dataset in the project, and a benchmark cell owned through its benchmark."""
    dataset = make_dataset_row(owner, name="shared", project=project)
    benchmark = Benchmark.objects.create(owner=owner, name="b", project=project)
    cell = BenchmarkCell.objects.create(benchmark=benchmark, seq=1, network="lenet", gpus=1, batch_size=1)
    return [dataset, cell]


@pytest.mark.parametrize(
    "who, sees, changes",
    [("owner", True, True), ("editor", True, True), ("viewer", True, False), ("other_user", False, False),
     ("staff_user", True, True)],
)  # fmt: skip
def test_it_lets_each_role_see_and_change_what_its_rung_allows(request, shared, who, sees, changes):
    user = request.getfixturevalue(who)
    for row in shared:
        rows = type(row).objects
        assert rows.visible_to(user).filter(pk=row.pk).exists() is sees, (who, type(row).__name__)
        assert rows.changeable_by(user).filter(pk=row.pk).exists() is changes, (who, type(row).__name__)
        assert row.is_visible_to(user) is sees
        assert row.is_changeable_by(user) is changes


def test_it_keeps_unshared_rows_their_owners_alone(owner, viewer, editor, project):
    private = make_dataset_row(owner, name="private")
    for member in (viewer, editor):
        assert not Dataset.objects.visible_to(member).filter(pk=private.pk).exists()
        assert not private.is_visible_to(member)


def test_it_lists_a_shared_row_once_however_many_members_its_project_has(owner, shared, project, django_user_model):
    for n in range(5):
        Membership.objects.create(project=project, user=django_user_model.objects.create_user(f"m{n}"), role=VIEWER)
    assert Dataset.objects.visible_to(owner).count() == 1
    assert Dataset.objects.visible_to(django_user_model.objects.get(username="m3")).count() == 1


def test_it_takes_sight_away_the_moment_a_member_leaves(viewer, shared, project):
    Membership.objects.filter(project=project, user=viewer).delete()
    assert not Dataset.objects.visible_to(viewer).exists()
    assert not shared[0].is_visible_to(viewer)


def test_it_lists_what_others_shared_with_me(owner, viewer, shared):
    mine = make_dataset_row(viewer, name="mine", project=shared[0].project)
    assert list(Dataset.objects.in_projects_of(viewer)) == [shared[0]]
    assert list(Dataset.objects.in_projects_of(owner)) == [mine]


def test_it_shares_what_a_project_holds_and_keeps_a_users_jobs_their_own():
    # A viewer's test of a shared run is theirs alone: jobs have no path to a project.
    assert project_path(InferenceJob) is None
    assert project_path(Dataset) == "project"
    assert project_path(BenchmarkCell) == "benchmark__project"


def test_it_answers_404_to_strangers_and_403_with_the_role_to_viewers(owner, viewer, other_user, shared):
    dataset = shared[0]
    with pytest.raises(Http404):
        row_to_change(Dataset.objects, other_user, dataset.pk, noun="dataset")
    with pytest.raises(PermissionDenied, match="you are a viewer of project vision-lab"):
        row_to_change(Dataset.objects, viewer, dataset.pk, noun="dataset")
    assert row_to_change(Dataset.objects, owner, dataset.pk, noun="dataset") == dataset
