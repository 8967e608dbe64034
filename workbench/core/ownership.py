"""Who may see a row and who may change it: the one rule, for every model that has an owner.

Staff see and change every row. Any other signed-in user sees the rows they own and the rows put
into a project they are a member of (any role), and changes the rows they own and the rows of a
project where they are an editor or an admin. Nobody else sees any. The roles' ladder is here
too (`ROLES`); `workbench/projects/` holds the projects and memberships themselves, reached from
here through their relation names (`project__memberships__user`): a lookup, not an import, so
this bottom layer depends on no app above it.

A model owned directly has an `owner` ForeignKey to the user model, and a nullable `project`
ForeignKey when it can be shared; a model owned through another, whose rows live and die with it
(a run's events, a search's trials), names the path to the owner in Django's lookup syntax:
`owner_field = "run__owner"`; its project is its parent's (`run__project`).

Selectors read through `OwnedQuerySet.visible_to`, so what someone may not see answers exactly
like what does not exist (404); writes read through `changeable_by`. A row already loaded
answers `is_visible_to` / `is_changeable_by`. The forms sit side by side here so they cannot
drift apart, and tests/workbench/core/test_ownership.py checks that every model with an owner
uses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from django.core.exceptions import FieldDoesNotExist, PermissionDenied
from django.db import models
from django.http import Http404

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

    Viewer = AbstractBaseUser | AnonymousUser | None

VIEWER, EDITOR, ADMIN = "viewer", "editor", "admin"
# Each role allows what the ones before it allow, and more (docs/design.md, "Projects and roles").
ROLES: tuple[str, ...] = (VIEWER, EDITOR, ADMIN)
ROLE_WORDS = {
    VIEWER: "sees and uses the project's datasets, runs, searches, benchmarks and weights",
    EDITOR: "also changes, shares, pauses, aborts and deletes them",
    ADMIN: "also manages the project's members",
}
CHANGING_ROLES: tuple[str, ...] = (EDITOR, ADMIN)


def a_role(role: str | None) -> str:
    """'a viewer', 'an editor', 'an admin'; 'not a member' for None."""
    if role is None:
        return "not a member"
    return f"{'an' if role[0] in 'aeiou' else 'a'} {role}"


def roles_at_least(role: str) -> tuple[str, ...]:
    """The roles that allow what `role` allows: `roles_at_least(EDITOR)` is (editor, admin)."""
    return ROLES[ROLES.index(role) :]


def _signed_in(user: Viewer) -> bool:
    # Anonymous sees nothing: said here, not left to what filter(owner=AnonymousUser()) does.
    return user is not None and user.is_authenticated


def project_path(model: type[models.Model]) -> str | None:
    """The lookup path from `model` to its project (`project`, `run__project`), or None for a
    model that cannot be shared (a user's own inference jobs)."""
    *parents, _owner = model.owner_field.split("__")
    current = model
    for name in parents:
        current = current._meta.get_field(name).related_model
    try:
        current._meta.get_field("project")
    except FieldDoesNotExist:
        return None
    return "__".join([*parents, "project"])


class OwnedQuerySet(models.QuerySet):
    def visible_to(self, user: Viewer) -> models.QuerySet:
        """The rows `user` may see: all for staff; their own and their projects' for anyone else
        signed in; none otherwise."""
        return self._allowed(user, roles=ROLES)

    def changeable_by(self, user: Viewer) -> models.QuerySet:
        """The rows `user` may change: all for staff; their own and those of the projects where
        they are an editor or admin for anyone else signed in; none otherwise."""
        return self._allowed(user, roles=CHANGING_ROLES)

    def owned_by(self, user: Viewer) -> models.QuerySet:
        """The rows `user` owns, staff or not: for lists of one's own that staff's sight of every
        row must not widen (the uploads a user may list and delete: runs/web/pretrained_api.py)."""
        if not _signed_in(user):
            return self.none()
        return self.filter(**{self.model.owner_field: user})

    def in_projects_of(self, user: Viewer) -> models.QuerySet:
        """The rows of others that `user` sees through a project ("Shared with me")."""
        path = project_path(self.model)
        if not _signed_in(user) or path is None:
            return self.none()
        return self.filter(**{f"{path}__memberships__user": user}).exclude(**{self.model.owner_field: user})

    def _allowed(self, user: Viewer, *, roles: tuple[str, ...]) -> models.QuerySet:
        if not _signed_in(user):
            return self.none()
        if user.is_staff:
            return self
        mine = models.Q(**{self.model.owner_field: user})
        path = project_path(self.model)
        if path is None:
            return self.filter(mine)
        # A subquery, not a join: a project with many members would repeat each row once per member.
        shared = self.model._default_manager.filter(
            **{f"{path}__memberships__user": user, f"{path}__memberships__role__in": roles}
        ).values("pk")
        return self.filter(mine | models.Q(pk__in=shared))


class OwnedModel(models.Model):
    """A row with an owner. `owner_field` is the lookup path to the user who owns it."""

    owner_field: ClassVar[str] = "owner"

    # Not used in migrations (QuerySet.as_manager's default), so adopting the rule needs none.
    objects = OwnedQuerySet.as_manager()

    class Meta:
        abstract = True

    def is_visible_to(self, user: Viewer) -> bool:
        """OwnedQuerySet.visible_to's rule, for one row already loaded."""
        return self._allows(user, roles=ROLES)

    def is_changeable_by(self, user: Viewer) -> bool:
        """OwnedQuerySet.changeable_by's rule, for one row already loaded."""
        return self._allows(user, roles=CHANGING_ROLES)

    def _allows(self, user: Viewer, *, roles: tuple[str, ...]) -> bool:
        if not _signed_in(user):
            return False
        if user.is_staff or self.owner_id_value() == user.pk:
            return True
        project_id = self.project_id_value()
        if project_id is None:
            return False
        return (
            _project_model(type(self))
            ._default_manager.filter(pk=project_id, memberships__user=user, memberships__role__in=roles)
            .exists()
        )

    def owner_id_value(self) -> int | None:
        """The owner's id, following `owner_field` through the parents: the last hop reads the
        foreign key's column (`owner_id`), so a row whose parent is loaded costs no query."""
        return self._follow(self.owner_field)

    def project_id_value(self) -> int | None:
        """The project's id, as owner_id_value follows the owner; None when not shared."""
        path = project_path(type(self))
        return None if path is None else self._follow(path)

    def _follow(self, path: str) -> int | None:
        *parents, last = path.split("__")
        row: models.Model | None = self
        for name in parents:
            row = getattr(row, name)
            if row is None:  # a nullable parent that is gone: nobody owns the row any more
                return None
        return getattr(row, row._meta.get_field(last).attname)


def _project_model(model: type[models.Model]) -> type[models.Model]:
    current = model
    for name in project_path(model).split("__"):
        current = current._meta.get_field(name).related_model
    return current


def row_to_change(rows: OwnedQuerySet, user: Viewer, pk: int, *, noun: str) -> OwnedModel:
    """The row of `rows` with this pk that `user` may change. Http404 when they may not see it
    (the same answer as a missing one); PermissionDenied naming their role when they may see it
    but not change it: a viewer of a project reads why the button did nothing."""
    row = rows.visible_to(user).filter(pk=pk).first()
    if row is None:
        raise Http404(f"no {noun} {pk}")
    if not row.is_changeable_by(user):
        raise PermissionDenied(refusal_words(row, user, noun=noun))
    return row


def refusal_words(row: OwnedModel, user: Viewer, *, noun: str) -> str:
    """Why `user` may see this row but not change it, with their role in its project."""
    project = _project_model(type(row))._default_manager.filter(pk=row.project_id_value()).first()
    membership = project.memberships.filter(user=user).first() if project else None
    where = f"project {project.slug}" if project else "its project"
    role = a_role(membership.role if membership else None)
    return f"you are {role} of {where}: only the owner, the project's editors and admins may change this {noun}"
