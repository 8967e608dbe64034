"""Who may see a row: the one rule, for every model that has an owner.

Staff see every row; any other signed-in user sees the rows they own; nobody else sees any.
A model owned directly has an `owner` ForeignKey to the user model; a model owned through
another, whose rows live and die with it (a run's events, a search's trials), names the path to
the owner in Django's lookup syntax: `owner_field = "run__owner"`.

Selectors read through `OwnedQuerySet.visible_to`, so what someone may not see answers exactly
like what does not exist (404); a row already loaded answers `is_visible_to`. The two forms sit
side by side here so they cannot drift apart, and tests/workbench/core/test_ownership.py checks
that every model with an owner uses them: projects shared by role change this module alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from django.db import models

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

    Viewer = AbstractBaseUser | AnonymousUser | None


def _signed_in(user: Viewer) -> bool:
    # Anonymous sees nothing: said here, not left to what filter(owner=AnonymousUser()) does.
    return user is not None and user.is_authenticated


class OwnedQuerySet(models.QuerySet):
    def visible_to(self, user: Viewer) -> models.QuerySet:
        """The rows `user` may see: all for staff, their own for anyone else signed in, none otherwise."""
        if _signed_in(user) and user.is_staff:
            return self
        return self.owned_by(user)

    def owned_by(self, user: Viewer) -> models.QuerySet:
        """The rows `user` owns, staff or not: for lists of one's own that staff's sight of every
        row must not widen (the uploads a user may list and delete: runs/web/pretrained_api.py)."""
        if not _signed_in(user):
            return self.none()
        return self.filter(**{self.model.owner_field: user})


class OwnedModel(models.Model):
    """A row with an owner. `owner_field` is the lookup path to the user who owns it."""

    owner_field: ClassVar[str] = "owner"

    # Not used in migrations (QuerySet.as_manager's default), so adopting the rule needs none.
    objects = OwnedQuerySet.as_manager()

    class Meta:
        abstract = True

    def is_visible_to(self, user: Viewer) -> bool:
        """OwnedQuerySet.visible_to's rule, for one row already loaded."""
        if not _signed_in(user):
            return False
        return user.is_staff or self.owner_id_value() == user.pk

    def owner_id_value(self) -> int | None:
        """The owner's id, following `owner_field` through the parents: the last hop reads the
        foreign key's column (`owner_id`), so a row whose parent is loaded costs no query."""
        *parents, last = self.owner_field.split("__")
        row: models.Model | None = self
        for name in parents:
            row = getattr(row, name)
            if row is None:  # a nullable parent that is gone: nobody owns the row any more
                return None
        return getattr(row, row._meta.get_field(last).attname)
