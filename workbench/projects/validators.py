"""Every rule on what a project, a membership or a share request may hold: the same words for
the pages, the API and the commands (workbench/core/adapters.py turns a RequestError into each)."""

from __future__ import annotations

import math

from django.contrib.auth import get_user_model
from django.utils.text import slugify

from workbench.core.errors import RequestError
from workbench.core.ownership import ROLES
from workbench.projects.models import Project, Quota

# What can be put into a project, by the name a request uses, and the model behind it (a label,
# so this app imports none of the apps above it).
SHAREABLE: dict[str, str] = {
    "dataset": "datasets.Dataset",
    "run": "runs.Run",
    "search": "searches.Search",
    "benchmark": "benchmarks.Benchmark",
    "weights": "weights.UploadedWeights",
}


# Addresses under /projects/ that are pages, not projects (workbench/projects/urls.py).
RESERVED_SLUGS = frozenset({"share", "quotas"})


def clean_project_fields(*, name: object, slug: object = None, description: object = "") -> dict:
    """{name, slug, description} cleaned; the slug defaults to the name's."""
    if not isinstance(name, str) or not name.strip():
        raise RequestError("name", "give the project a name")
    name = name.strip()
    if len(name) > 80:
        raise RequestError("name", f"at most 80 characters, not {len(name)}")
    slug = slugify(slug if isinstance(slug, str) and slug.strip() else name)
    if not slug:
        raise RequestError("slug", "give a slug of letters, digits, - or _ (the name has none)")
    if slug in RESERVED_SLUGS:
        raise RequestError("slug", f"{slug!r} names a page of the workbench (/projects/{slug}/); choose another")
    if len(slug) > 60:
        raise RequestError("slug", f"at most 60 characters, not {len(slug)}")
    if Project.objects.filter(slug=slug).exists():
        raise RequestError("slug", f"a project named {slug!r} exists already")
    if not isinstance(description, str) or len(description) > 500:
        raise RequestError("description", "text of at most 500 characters")
    return {"name": name, "slug": slug, "description": description.strip()}


def clean_role(role: object) -> str:
    if role not in ROLES:
        raise RequestError("role", f"{role!r} is not a role; one of {', '.join(ROLES)}")
    return role


def user_named(username: object):
    if not isinstance(username, str) or not username.strip():
        raise RequestError("user", "give a username")
    user = get_user_model().objects.filter(username=username.strip(), is_active=True).first()
    if user is None:
        raise RequestError("user", f"no user named {username.strip()!r}")
    return user


def project_to_put_into(user, slug: object) -> Project | None:
    """The project `user` may put their work into (a share, or a new run naming one): one they are
    a member of, any for staff; None for none ("" or None)."""
    if slug in (None, ""):
        return None
    if not isinstance(slug, str):
        raise RequestError("project", "give a project's slug, or null for none")
    project = Project.objects.filter(slug=slug).first()
    if project is None or not (user.is_staff or project.memberships.filter(user=user).exists()):
        raise RequestError("project", f"no project {slug[:100]!r} of yours")
    return project


def clean_kind(kind: object) -> str:
    if kind not in SHAREABLE:
        raise RequestError("kind", f"{kind!r} cannot be shared; one of {', '.join(SHAREABLE)}")
    return kind


def clean_object_id(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        try:
            number = int(str(value))
        except ValueError:
            number = 0
        if number < 1:
            raise RequestError("id", f"{value!r} is not an id (a whole number from 1)")
        return number
    return value


def clean_quota(*, gpu_hours: object, period: object = "month", window_days: object = 30) -> dict:
    """{gpu_hours, period, window_days} cleaned: a finite number of GPU-hours from 0, a calendar
    month or a rolling window of 1 to 366 days."""
    try:
        hours = float(gpu_hours)
    except (TypeError, ValueError):
        raise RequestError("gpu_hours", f"{gpu_hours!r} is not a number of GPU-hours") from None
    if not math.isfinite(hours) or hours < 0 or hours > 10_000_000:
        raise RequestError("gpu_hours", f"{gpu_hours!r}: give GPU-hours from 0 to 10,000,000")
    if period not in Quota.Period.values:
        raise RequestError("period", f"{period!r} is not a period; one of {', '.join(Quota.Period.values)}")
    try:
        days = int(window_days if window_days not in (None, "") else 30)
    except (TypeError, ValueError):
        raise RequestError("window_days", f"{window_days!r} is not a whole number of days") from None
    if not 1 <= days <= 366:
        raise RequestError("window_days", f"{days} days: give 1 to 366")
    return {"gpu_hours": hours, "period": period, "window_days": days}
