"""The project controls other apps' pages show, drawn from the request's user so their views
need not know of projects: the lists' "All / Shared with me / <project>" filter, the dataset
and run pages' Project select (its owner and staff) or "Shared in <project>" (everyone else), and
the GPU-hours a quota allows and what of them is used (Home, the project page, the quotas page)."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.db.models import Q

from workbench.projects.quotas import usage
from workbench.projects.selectors import projects_visible_to, quotas_for

register = template.Library()

# The query parameters the filter sets (projects.selectors.filtered_by_query reads them).
SHARING_PARAMS = ("project", "shared")


@register.inclusion_tag("projects/_sharing_filter.html", takes_context=True)
def sharing_filter(context) -> dict:
    """Links that keep the list's other parameters (the runs' state, sort...) and set one of
    `?shared=1`, `?project=<slug>` or neither; the chosen one is marked current."""
    request = context["request"]
    chosen_project = request.GET.get("project", "")
    shared = request.GET.get("shared", "") in ("1", "true", "yes")

    def query(**value: str) -> str:
        params = request.GET.copy()
        for name in SHARING_PARAMS:
            params.pop(name, None)
        params.update(value)
        return f"?{params.urlencode()}" if params else request.path

    options = [
        {"words": "All", "href": query(), "current": not chosen_project and not shared},
        {"words": "Shared with me", "href": query(shared="1"), "current": shared and not chosen_project},
    ]
    options += [
        {"words": project.slug, "href": query(project=project.slug), "current": chosen_project == project.slug}
        for project in projects_visible_to(request.user)
    ]
    return {"options": options}


@register.inclusion_tag("projects/_share.html", takes_context=True)
def share_control(context, row, kind: str) -> dict:
    """The Project select of `row` (a dataset, a run) for its owner and staff: none or a project
    they are a member of (staff: any); the project it is in, as a link, for everyone else."""
    request = context["request"]
    user, project = request.user, row.project
    projects = list(projects_visible_to(user))
    if project is not None and project not in projects:  # one the owner has left: shown as it is
        projects.append(project)
    return {
        "row": row,
        "kind": kind,
        "project": project,
        "may_share": user.is_staff or row.owner_id_value() == user.pk,
        "projects": projects,
        "next": request.get_full_path(),
        "csrf_token": context.get("csrf_token"),
    }


@register.simple_tag(takes_context=True)
def quotas_of_mine(context) -> list:
    """The quotas that concern the request's user: their own and their projects' (staff read every
    quota, but Home shows them theirs alone)."""
    user = context["request"].user
    if not user.is_authenticated:
        return []
    return list(quotas_for(user).filter(Q(user=user) | Q(project__memberships__user=user)))


@register.inclusion_tag("projects/_quota.html")
def quota_use(quota) -> dict:
    """A quota as "used / allowed GPU-hours <period> for <holder>" with a meter, and when it is
    spent, when it allows GPU jobs again (workbench/projects/quotas.usage, as the API reports it)."""
    row = usage(quota)
    allowed, again = row["gpu_hours"], row["allowed_again_at"]
    return {
        "holder": row["for"],
        "used": row["used_gpu_hours"],
        "allowed": allowed,
        "period_words": row["period_words"],
        "spent": row["spent"],
        "allowed_again_at": datetime.fromisoformat(again) if again else None,
        # The meter's colours: as planned below 80 %, near the limit from there, over it when spent.
        "low": 0.8 * allowed,
        "high": allowed,
    }
