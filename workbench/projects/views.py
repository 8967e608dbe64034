"""The project pages: one's projects (staff create them), one project with its members and what it
holds (its admins and staff add, change and remove members; staff set its GPU-hour quota), the
staff's page of every quota, and the Project select of the dataset and run pages
(`project_share`). Every change goes through workbench/projects/services.py, which refuses alike
for the pages, the API and the commands."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from workbench.core.adapters import add_form_errors
from workbench.core.errors import RequestError
from workbench.core.ownership import ROLE_WORDS, a_role
from workbench.projects import services
from workbench.projects.forms import MemberForm, ProjectForm, QuotaForm, ShareForm, UserQuotaForm
from workbench.projects.selectors import (
    may_manage,
    members_of,
    project_for,
    project_summary,
    project_to_manage,
    projects_visible_to,
    quotas_for,
    role_of,
)

# What a project holds, as its page lists it: the relation (selectors.HOLDINGS), a heading, the
# page of one row (uploaded weights have none: the staff's Weights page lists them all) and the
# field that says when the row was made.
SECTIONS = (
    ("datasets", "Datasets", "dataset-detail", "created_at"),
    ("runs", "Runs", "run-detail", "created_at"),
    ("searches", "Searches", "search-detail", "created_at"),
    ("benchmarks", "Benchmarks", "benchmark-detail", "queued_at"),
    ("weights", "Uploaded weights", None, "created"),
)
# The page of each kind of object that can be shared, to go back to after a share.
PAGE_OF_KIND = {
    "dataset": "dataset-detail",
    "run": "run-detail",
    "search": "search-detail",
    "benchmark": "benchmark-detail",
}


@login_required
@require_http_methods(["GET", "POST"])
def project_list(request):
    form = ProjectForm(request.POST or None) if request.user.is_staff else None
    if request.method == "POST":
        if form is None:
            raise PermissionDenied("only staff create projects")
        if form.is_valid():
            try:
                project = services.project_create(by=request.user, **form.cleaned_data)
            except RequestError as error:
                add_form_errors(form, error)
            else:
                messages.success(request, f"Project “{project.name}” was created.")
                return redirect("project-detail", slug=project.slug)
    projects = [project_summary(project, request.user) for project in projects_visible_to(request.user)]
    context = {"projects": projects, "form": form}
    return render(request, "projects/list.html", context, status=400 if form and form.errors else 200)


@login_required
def project_detail(request, slug: str):
    return _detail_page(request, project_for(request.user, slug), MemberForm())


def _detail_page(request, project, form: MemberForm, status: int = 200, quota_form: QuotaForm | None = None):
    sections = [
        {
            "name": name,
            "title": title,
            "page": page,
            "rows": [
                (row, getattr(row, made))
                for row in getattr(project, name).select_related("owner").visible_to(request.user)[:200]
            ],
        }
        for name, title, page, made in SECTIONS
    ]
    context = {
        "project": project,
        "role": role_of(request.user, project),
        "manages": may_manage(request.user, project),
        "members": members_of(project),
        "role_words": ROLE_WORDS.items(),
        "sections": sections,
        "form": form,
    }
    quota = quotas_for(request.user).filter(project=project).first()
    context["quota"] = quota
    if request.user.is_staff:
        context["quota_form"] = quota_form or QuotaForm.of(quota)
    return render(request, "projects/detail.html", context, status=status)


@login_required
@require_POST
def project_member_set(request, slug: str):
    project = project_to_manage(request.user, slug)
    form = MemberForm(request.POST)
    if form.is_valid():
        username, role = form.cleaned_data["username"], form.cleaned_data["role"]
        try:
            services.member_set(by=request.user, project=project, username=username, role=role)
        except RequestError as error:
            add_form_errors(form, error, field_of={"user": "username"})
        else:
            messages.success(request, f"{username} is now {a_role(role)} of {project.name}.")
            return redirect("project-detail", slug=project.slug)
    return _detail_page(request, project, form, status=400)


@login_required
@require_POST
def project_member_remove(request, slug: str):
    project = project_to_manage(request.user, slug)
    username = request.POST.get("username", "")
    try:
        services.member_remove(by=request.user, project=project, username=username)
    except RequestError as error:
        messages.error(request, f"Nobody was removed: {error.message}.")
    else:
        messages.success(request, f"{username} was removed from {project.name} and no longer sees what it holds.")
    if not projects_visible_to(request.user).filter(pk=project.pk).exists():
        return redirect("project-list")  # an admin who removed themselves
    return redirect("project-detail", slug=project.slug)


@login_required
@require_POST
def project_share(request):
    """The dataset and run pages' Project select: puts the object into the project, or takes it
    out (a blank project). Only its owner or staff may (services.share answers 403 otherwise)."""
    form = ShareForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Nothing was shared: the request did not say what to share or into which project.")
        return redirect(_back(request, request.POST.get("next")))
    kind, pk, slug = form.cleaned_data["kind"], form.cleaned_data["id"], form.cleaned_data["project"]
    try:
        row = services.share(by=request.user, kind=kind, pk=pk, project_slug=slug)
    except RequestError as error:
        messages.error(request, f"Nothing was shared: {error.message}.")
    else:
        where = f"is now shared in project {slug}" if slug else "is in no project now: only its owner and staff see it"
        messages.success(request, f"The {kind} “{row.name}” {where}.")
    return redirect(_back(request, form.cleaned_data["next"], kind=kind, pk=pk))


def _back(request, next_url: str | None, *, kind: str | None = None, pk: int | None = None) -> str:
    """Where a share goes back to: the page it was posted from when that is this site's, else the
    object's own page, else the projects."""
    if next_url and url_has_allowed_host_and_scheme(next_url, {request.get_host()}, request.is_secure()):
        return next_url
    if kind in PAGE_OF_KIND:
        return reverse(PAGE_OF_KIND[kind], args=[pk])
    return reverse("project-list")


def _staff_only(request, doing: str) -> None:
    if not request.user.is_staff:
        raise PermissionDenied(f"only staff {doing}")


@login_required
@require_POST
def project_quota_set(request, slug: str):
    """The project page's quota form (staff): sets or changes the project's GPU-hours per period."""
    _staff_only(request, "set quotas")
    project = project_for(request.user, slug)
    form = QuotaForm(request.POST)
    if form.is_valid():
        try:
            quota = services.quota_set(by=request.user, project_slug=project.slug, **form.cleaned_data)
        except RequestError as error:
            add_form_errors(form, error)
        else:
            messages.success(request, f"Quota set: {quota}.")
            return redirect("project-detail", slug=project.slug)
    return _detail_page(request, project, MemberForm(), status=400, quota_form=form)


@login_required
@require_POST
def project_quota_clear(request, slug: str):
    """The project page's Clear (staff): the project's GPU jobs are held for GPU-hours no more."""
    _staff_only(request, "clear quotas")
    project = project_for(request.user, slug)
    _clear(request, project_slug=project.slug)
    return redirect("project-detail", slug=project.slug)


@login_required
@require_http_methods(["GET", "POST"])
def project_quotas(request):
    """The staff's page of every quota with its use; its form sets one user's quota."""
    _staff_only(request, "manage quotas")
    form = UserQuotaForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        fields = dict(form.cleaned_data)
        try:
            quota = services.quota_set(by=request.user, username=fields.pop("username"), **fields)
        except RequestError as error:
            add_form_errors(form, error, field_of={"user": "username"})
        else:
            messages.success(request, f"Quota set: {quota}.")
            return redirect("project-quotas")
    context = {"quotas": quotas_for(request.user), "form": form}
    return render(request, "projects/quotas.html", context, status=400 if form.errors else 200)


@login_required
@require_POST
def project_quotas_clear(request):
    """The quotas page's Clear of one row: a user's (`user`) or a project's (`project`) quota."""
    _staff_only(request, "clear quotas")
    _clear(request, username=request.POST.get("user") or None, project_slug=request.POST.get("project") or None)
    return redirect("project-quotas")


def _clear(request, **holder) -> None:
    try:
        services.quota_clear(by=request.user, **holder)
    except RequestError as error:
        messages.error(request, f"No quota was cleared: {error.message}.")
    else:
        who = f"user {holder['username']}" if holder.get("username") else f"project {holder['project_slug']}"
        messages.success(request, f"The quota of {who} was cleared: its GPU jobs are no longer held for GPU-hours.")
