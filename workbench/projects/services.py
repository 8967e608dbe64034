"""Every change to projects: create, add or change a member, remove one, share an object into a
project or take it out. Keyword-only; whoever acts is `by`, checked here against the rules of
workbench/core/ownership.py and the project's admins, so the page, the API and the commands
refuse alike."""

from __future__ import annotations

from django.apps import apps
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404

from workbench.audit import services as audit
from workbench.core.errors import RequestError
from workbench.core.groups import publish_access_changed
from workbench.core.ownership import ADMIN
from workbench.projects import quotas, validators
from workbench.projects.models import Membership, Project, Quota
from workbench.projects.selectors import project_to_manage


def project_create(*, by, name: str, slug: str | None = None, description: str = "", admins=()) -> Project:
    """Staff create projects (a lab's, a course's); `admins` become its first admins."""
    if not by.is_staff:
        raise PermissionDenied("only staff create projects")
    fields = validators.clean_project_fields(name=name, slug=slug, description=description)
    with transaction.atomic():
        project = Project.objects.create(created_by=by, **fields)
        for user in admins:
            Membership.objects.create(project=project, user=user, role=ADMIN)
        after = {**fields, "admins": [user.get_username() for user in admins]}
        audit.record(action="project.create", actor=by, target=project, after=after)
    return project


def member_set(*, by, project: Project, username: str, role: str) -> Membership:
    """Adds the user with `role`, or changes their role. Staff and the project's admins may."""
    _require_manager(by, project)
    user = validators.user_named(username)
    role = validators.clean_role(role)
    with transaction.atomic():
        membership, created = Membership.objects.select_for_update().get_or_create(
            project=project, user=user, defaults={"role": role}
        )
        before = None if created else {"user": user.username, "role": membership.role}
        if membership.role != role:
            _keep_an_admin(project, leaving=membership, by=by, becomes=role)
            membership.role = role
            membership.save(update_fields=["role"])
        after = {"user": user.username, "role": role}
        audit.record(action="project.member_set", actor=by, target=project, before=before, after=after)
    return membership


def member_remove(*, by, project: Project, username: str) -> None:
    """Removes the member: they lose sight of the project's objects at once, their open object
    sockets included (core.access)."""
    _require_manager(by, project)
    user = validators.user_named(username)
    with transaction.atomic():
        membership = Membership.objects.select_for_update().filter(project=project, user=user).first()
        if membership is None:
            raise RequestError("user", f"{user.username} is not a member of {project.slug}")
        _keep_an_admin(project, leaving=membership, by=by, becomes=None)
        membership.delete()
        before = {"user": user.username, "role": membership.role}
        audit.record(action="project.member_remove", actor=by, target=project, before=before)
        transaction.on_commit(lambda: publish_access_changed(user.pk))


def share(*, by, kind: str, pk: int, project_slug: str | None):
    """Puts the object into the project, or takes it out of any (project_slug None). Only its
    owner or staff may, and only into a project they are a member of (staff: any)."""
    model = apps.get_model(validators.SHAREABLE[validators.clean_kind(kind)])
    pk = validators.clean_object_id(pk)
    row = model.objects.visible_to(by).filter(pk=pk).first()
    if row is None:
        raise Http404(f"no {kind} {pk}")
    if not (by.is_staff or row.owner_id_value() == by.pk):
        raise PermissionDenied(f"only the owner of this {kind} (or staff) may share it or take it out of a project")
    project = validators.project_to_put_into(by, project_slug)
    previous = row.project_id
    model.objects.filter(pk=row.pk).update(project=project)
    before, after = {"project": row.project.slug if previous else None}, {"project": project.slug if project else None}
    audit.record(action=f"{kind}.share", actor=by, target=row, target_kind=kind, before=before, after=after)
    if previous is not None and previous != (project.pk if project else None):
        # Members of the project it left may no longer see it.
        for user_id in Membership.objects.filter(project_id=previous).values_list("user_id", flat=True):
            transaction.on_commit(lambda user_id=user_id: publish_access_changed(user_id))
    row.refresh_from_db()
    return row


def _require_manager(by, project: Project) -> None:
    project_to_manage(by, project.slug)  # 404 for a non-member, 403 naming a member's role


def _keep_an_admin(project: Project, *, leaving: Membership, by, becomes: str | None) -> None:
    """A project keeps an admin: its last one may not leave or step down unless staff act."""
    if leaving.role != ADMIN or becomes == ADMIN or by.is_staff:
        return
    if not project.memberships.filter(role=ADMIN).exclude(pk=leaving.pk).exists():
        raise RequestError(
            "user", f"{leaving.user.username} is the last admin of {project.slug}; make another member admin first"
        )


def quota_set(*, by, username: str | None = None, project_slug: str | None = None, **fields) -> Quota:
    """Sets (or changes) the GPU-hours of one user or one project per period (staff only)."""
    if not by.is_staff:
        raise PermissionDenied("only staff set quotas")
    holder = _quota_holder(username=username, project_slug=project_slug)
    cleaned = validators.clean_quota(**fields)
    with transaction.atomic():
        quota = Quota.objects.select_for_update().filter(**holder).first()
        before = _quota_words(quota)
        if quota is None:
            quota = Quota(**holder)
        for name, value in cleaned.items():
            setattr(quota, name, value)
        quota.set_by = by
        quota.save()
        audit.record(action="quota.set", actor=by, target=quota, target_name=quota.holder_words,
                     before=before, after=_quota_words(quota))  # fmt: skip
    transaction.on_commit(quotas.quota_changed)
    return quota


def quota_clear(*, by, username: str | None = None, project_slug: str | None = None) -> None:
    if not by.is_staff:
        raise PermissionDenied("only staff clear quotas")
    holder = _quota_holder(username=username, project_slug=project_slug)
    with transaction.atomic():
        quota = Quota.objects.select_for_update().filter(**holder).first()
        if quota is None:
            raise RequestError(None, "there is no quota to clear")
        audit.record(action="quota.clear", actor=by, target=quota, target_name=quota.holder_words,
                     before=_quota_words(quota))  # fmt: skip
        quota.delete()
    transaction.on_commit(quotas.quota_changed)


def _quota_holder(*, username: str | None, project_slug: str | None) -> dict:
    if bool(username) == bool(project_slug):
        raise RequestError(None, "give a user or a project, not both")
    if username:
        return {"user": validators.user_named(username)}
    project = Project.objects.filter(slug=project_slug).first()
    if project is None:
        raise RequestError("project", f"no project {project_slug!r}")
    return {"project": project}


def _quota_words(quota: Quota | None) -> dict | None:
    if quota is None:
        return None
    return {"gpu_hours": quota.gpu_hours, "period": quota.period, "window_days": quota.window_days}
