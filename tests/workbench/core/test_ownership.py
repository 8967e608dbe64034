"""Who may see a row (workbench/core/ownership.py): the one rule, and every owned model using it.

A model with an owner, directly (an `owner` ForeignKey to the user model) or through a parent its
rows die with (a CASCADE ForeignKey to an owned model), must read through OwnedQuerySet and answer
OwnedModel.is_visible_to, never a copy: projects shared by role change the rule in one place
(tests/workbench/projects/test_roles.py holds the roles).
"""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.db import models

from datasets.models import Dataset
from workbench.benchmarks.models import Benchmark, BenchmarkCell
from workbench.core.ownership import OwnedModel, OwnedQuerySet

# A ForeignKey to the user model not named `owner` says who did something, not who may see the
# row; each is listed here with its reason, so that a new one is a decision, not an accident.
NOT_OWNERSHIP = {
    ("weights", "StoredWeights", "created_by"): "a library every user may start a run from; staff file it",
    ("datasets", "DatasetVersion", "created_by"): "who made the version; it is its dataset's (owner_field)",
    ("projects", "Project", "created_by"): "who made it; members see a project (projects.selectors), nobody owns it",
    ("audit", "AuditEntry", "actor"): "who made the change; staff read the trail (audit.selectors), nobody owns it",
    ("projects", "Quota", "user"): "whose GPU-hours it limits; staff set it (projects.services.quota_set)",
    ("projects", "Quota", "set_by"): "which staff member set it",
    ("notices", "NoticeSettings", "user"): "one's own settings, read through services.settings_for(request.user)",
    ("notices", "Notice", "user"): "whom it was sent to; read only as Notice.objects.filter(user=request.user)",
    ("projects", "GpuUsage", "user"): "whose GPU use the quotas count; read only by the quotas' arithmetic",
    ("directory", "ExternalIdentity", "user"): "the account a directory identity signs in as; read only at sign-in",
    ("projects", "Membership", "user"): "the member: the row the one rule reads to share, not an owned row",
}


def _project_models() -> list[type[models.Model]]:
    return [model for model in apps.get_models() if model.__module__.startswith(("datasets.", "workbench."))]


def _user_keys(model: type[models.Model]) -> list[models.ForeignKey]:
    user_model = get_user_model()
    return [f for f in model._meta.get_fields() if isinstance(f, models.ForeignKey) and f.related_model is user_model]


def _expected_owner_paths() -> dict[type[models.Model], set[str]]:
    """Every owned model and the paths to its owner it may declare: `owner` when it has one, else
    `<parent key>__<parent's path>` for each owned parent its rows are deleted with."""
    owned = {model: {"owner"} for model in _project_models() if any(f.name == "owner" for f in _user_keys(model))}
    grew = True
    while grew:  # parents of parents: a fixed point, since ownership can nest
        grew = False
        for model in _project_models():
            if model in owned:
                continue
            paths = {
                f"{key.name}__{path}"
                for key in model._meta.get_fields()
                if isinstance(key, models.ForeignKey) and key.remote_field.on_delete is models.CASCADE
                for path in owned.get(key.related_model, ())
            }
            if paths:
                owned[model], grew = paths, True
    return owned


def test_it_finds_the_owned_models_directly_and_through_their_parents():
    found = {model._meta.label: paths for model, paths in _expected_owner_paths().items()}
    assert found["datasets.Dataset"] == {"owner"}
    assert found["runs.RunEvent"] == {"run__owner"}
    assert found["searches.Trial"] == {"search__owner"}
    assert found["benchmarks.BenchmarkCell"] == {"benchmark__owner"}


def test_it_has_every_model_with_an_owner_use_the_one_rule():
    strays = []
    for model, paths in _expected_owner_paths().items():
        label = model._meta.label
        if not issubclass(model, OwnedModel) or model.owner_field not in paths:
            strays.append(f"{label}: not an OwnedModel with owner_field in {sorted(paths)}")
            continue
        queryset = type(model._default_manager.get_queryset())
        for rule in ("visible_to", "changeable_by"):
            if not issubclass(queryset, OwnedQuerySet) or getattr(queryset, rule) is not getattr(OwnedQuerySet, rule):
                strays.append(f"{label}: its default manager's {rule} is not OwnedQuerySet's")
        for rule in ("is_visible_to", "is_changeable_by"):
            if getattr(model, rule) is not getattr(OwnedModel, rule):
                strays.append(f"{label}: {rule} is its own, not OwnedModel's")
    assert strays == []


def test_it_lets_no_other_user_key_pass_for_an_owner_unsaid():
    unsaid = [
        f"{model._meta.label}.{key.name}"
        for model in _project_models()
        for key in _user_keys(model)
        if key.name != "owner" and (model._meta.app_label, model.__name__, key.name) not in NOT_OWNERSHIP
    ]
    assert unsaid == []


def test_it_keeps_no_copy_of_the_rule_on_models_outside_it():
    copies = [
        model._meta.label
        for model in _project_models()
        if not issubclass(model, OwnedModel)
        and (hasattr(model, "is_visible_to") or hasattr(model._default_manager.get_queryset(), "visible_to"))
    ]
    assert copies == []


@pytest.fixture
def rows(owner):
    dataset = Dataset.objects.create(owner=owner, name="d")
    benchmark = Benchmark.objects.create(owner=owner, name="b")
    cell = BenchmarkCell.objects.create(benchmark=benchmark, seq=1, network="lenet", gpus=1, batch_size=1, status="ok")
    return [dataset, cell]  # owned directly, and through a parent


@pytest.mark.django_db
@pytest.mark.parametrize(
    "viewer, sees",
    [("owner", True), ("other_user", False), ("staff_user", True), ("anonymous", False), ("nobody", False)],
)  # fmt: skip
def test_it_shows_a_row_to_its_owner_and_staff_only(request, rows, viewer, sees):
    strangers = {"anonymous": AnonymousUser(), "nobody": None}
    user = strangers[viewer] if viewer in strangers else request.getfixturevalue(viewer)
    for row in rows:
        assert type(row).objects.visible_to(user).filter(pk=row.pk).exists() is sees, type(row).__name__
        assert row.is_visible_to(user) is sees, type(row).__name__


@pytest.mark.django_db
def test_it_shows_other_users_their_own_rows_and_staff_all_of_them(owner, other_user, staff_user):
    mine = Dataset.objects.create(owner=owner, name="mine")
    theirs = Dataset.objects.create(owner=other_user, name="theirs")
    assert list(Dataset.objects.visible_to(other_user)) == [theirs]
    assert set(Dataset.objects.visible_to(staff_user)) == {mine, theirs}
    cell = BenchmarkCell.objects.create(
        benchmark=Benchmark.objects.create(owner=other_user, name="b"), seq=1, network="n", gpus=1, batch_size=1
    )
    assert list(BenchmarkCell.objects.visible_to(other_user)) == [cell]
    assert not BenchmarkCell.objects.visible_to(owner).exists()


@pytest.mark.django_db
def test_it_lists_only_their_own_rows_as_owned_even_for_staff(owner, staff_user):
    # The narrower rule beside the wide one: staff see every row, yet "my uploads" stays theirs.
    Dataset.objects.create(owner=owner, name="theirs")
    mine = Dataset.objects.create(owner=staff_user, name="mine")
    assert list(Dataset.objects.owned_by(staff_user)) == [mine]
    assert not Dataset.objects.owned_by(AnonymousUser()).exists()
