"""A project "vision-lab" with alice (its admin, the `owner` fixture), a viewer and an editor;
bob (`other_user`) is not a member, carol (`staff_user`) is staff; `shared_work`: one of each
kind of alice's rows in it."""

from __future__ import annotations

import pytest

from tests.conftest import PASSWORD
from tests.support.factories import make_dataset_row
from workbench.benchmarks.models import Benchmark
from workbench.core.ownership import ADMIN, EDITOR, VIEWER
from workbench.projects.models import Membership, Project
from workbench.runs.models import Run
from workbench.searches.models import Search


@pytest.fixture
def viewer(django_user_model):
    return django_user_model.objects.create_user("vic", "vic@example.com", PASSWORD)


@pytest.fixture
def editor(django_user_model):
    return django_user_model.objects.create_user("eddie", "eddie@example.com", PASSWORD)


@pytest.fixture
def project(owner, viewer, editor):
    lab = Project.objects.create(name="Vision lab", slug="vision-lab")
    Membership.objects.create(project=lab, user=owner, role=ADMIN)
    Membership.objects.create(project=lab, user=viewer, role=VIEWER)
    Membership.objects.create(project=lab, user=editor, role=EDITOR)
    return lab


@pytest.fixture
def shared_work(owner, project):
    dataset = make_dataset_row(owner, name="digits", project=project)
    run = Run.objects.create(owner=owner, name="alice-run", dataset=dataset, network="lenet", project=project)
    # Ended: an action that got past the rule would answer 409, never reach Optuna's study.
    search = Search.objects.create(owner=owner, name="s", dataset=dataset, network="lenet", max_trials=1,
                                   study_name="roles", state=Search.State.ABORTED, project=project)  # fmt: skip
    benchmark = Benchmark.objects.create(owner=owner, name="b", project=project)
    return {"dataset": dataset, "run": run, "search": search, "benchmark": benchmark}
