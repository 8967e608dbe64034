"""Reads of projects for a user: which they see, which they may manage, and the rows of other
apps put into one (reached through their relations: `project.datasets`, `project.runs`...)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.shortcuts import get_object_or_404

from workbench.core.ownership import ADMIN, a_role, project_path
from workbench.projects.models import Membership, Project, Quota


def projects_visible_to(user) -> QuerySet[Project]:
    """Staff see every project; anyone else the projects they are a member of."""
    if user is None or not user.is_authenticated:
        return Project.objects.none()
    if user.is_staff:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user)


def project_for(user, slug: str) -> Project:
    """The project, or Http404 for both a missing one and one the user is not a member of."""
    return get_object_or_404(projects_visible_to(user), slug=slug)


def project_to_manage(user, slug: str) -> Project:
    """The project whose members `user` may change: Http404 as project_for; 403 for a member who
    is not its admin (nor staff)."""
    project = project_for(user, slug)
    if not may_manage(user, project):
        role = a_role(role_of(user, project))
        raise PermissionDenied(
            f"you are {role} of project {project.slug}: only its admins and staff may manage members"
        )
    return project


def role_of(user, project: Project) -> str | None:
    """The user's role in the project; None for a non-member (staff included)."""
    membership = Membership.objects.filter(project=project, user=user).first()
    return membership.role if membership else None


def may_manage(user, project: Project) -> bool:
    return bool(user.is_staff or role_of(user, project) == ADMIN)


def members_of(project: Project) -> QuerySet[Membership]:
    return project.memberships.select_related("user").order_by("user__username")


def project_of_new_work(*, owner, dataset) -> Project | None:
    """The project a new run, search or benchmark on `dataset` goes into: the dataset's, when its
    owner is a member of it (a student's run on the course's dataset is followed by the course);
    else none, the owner's alone. Its owner may take it out or move it (services.share)."""
    project_id = getattr(dataset, "project_id", None)
    if project_id is None:
        return None
    return Project.objects.filter(pk=project_id, memberships__user=owner).first()


def filtered_by_sharing(rows: QuerySet, user, *, project: str | None = None, shared: bool = False) -> QuerySet:
    """A list's rows narrowed the way every list offers (page `?project=<slug>` / `?shared=1`, the
    API alike): one project's (404 for a project the user is not in), or what others shared with
    the user. `rows` are already those the user may see."""
    if project:
        rows = rows.filter(**{project_path(rows.model) or "project": project_for(user, project)})
    if shared:
        rows = rows & rows.model.objects.in_projects_of(user)
    return rows


# What a project holds, by the relation names its rows point back with (their models' `project`).
HOLDINGS = ("datasets", "runs", "searches", "benchmarks", "weights")


def project_summary(project: Project, user, *, members: bool = False) -> dict:
    """A project as the API and the pages show it: the user's role, and how many of each kind of
    row it holds (the rows themselves are read through each app's selectors)."""
    summary = {
        "name": project.name,
        "slug": project.slug,
        "description": project.description,
        "role": role_of(user, project),
        "holds": {name: getattr(project, name).count() for name in HOLDINGS},
    }
    if members:
        summary["members"] = [{"user": m.user.username, "role": m.role} for m in members_of(project)]
    return summary


def filtered_by_query(rows: QuerySet, user, params) -> QuerySet:
    """filtered_by_sharing with a request's `?project=<slug>` and `?shared=1` (pages and API)."""
    return filtered_by_sharing(
        rows, user, project=params.get("project") or None, shared=params.get("shared") in ("1", "true", "yes")
    )


def quotas_for(user) -> QuerySet[Quota]:
    """The quotas `user` may read: staff every one; anyone else their own and their projects'."""
    if user is None or not user.is_authenticated:
        return Quota.objects.none()
    quotas = Quota.objects.select_related("user", "project").order_by("project__slug", "user__username")
    if user.is_staff:
        return quotas
    return quotas.filter(Q(user=user) | Q(project__memberships__user=user))
