"""REST API of projects: list and create (staff), one project with its members and what it holds,
add or change a member, remove one, and share an object into a project or take it out."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.response import Response

from workbench.core.adapters import drf_error
from workbench.core.errors import RequestError
from workbench.core.openapi import error
from workbench.projects import services
from workbench.projects.quotas import usage
from workbench.projects.selectors import project_for, project_summary, projects_visible_to, quotas_for
from workbench.projects.validators import user_named

_PROJECT = inline_serializer(
    "ProjectCreate",
    {
        "name": serializers.CharField(),
        "slug": serializers.CharField(required=False, help_text="default: from the name"),
        "description": serializers.CharField(required=False),
        "admins": serializers.ListField(child=serializers.CharField(), required=False, help_text="usernames"),
    },
)


@extend_schema(methods=["GET"], summary="Projects you are a member of (staff: every project), with your role")
@extend_schema(
    methods=["POST"], summary="Create a project (staff)", request=_PROJECT, responses={201: OpenApiTypes.OBJECT}
)
@api_view(["GET", "POST"])
def project_list(request):
    if request.method == "POST":
        data = request.data if isinstance(request.data, dict) else {}
        try:
            admins = [user_named(name) for name in data.get("admins") or []]
            project = services.project_create(
                by=request.user,
                name=data.get("name"),
                slug=data.get("slug"),
                description=data.get("description") or "",
                admins=admins,
            )
        except RequestError as exc:
            raise drf_error(exc) from None
        return Response(project_summary(project, request.user), status=status.HTTP_201_CREATED)
    return Response({"results": [project_summary(p, request.user) for p in projects_visible_to(request.user)]})


@extend_schema(summary="A project: its members and roles, and how many of its rows you see")
@api_view(["GET"])
def project_detail(request, slug: str):
    return Response(project_summary(project_for(request.user, slug), request.user, members=True))


@extend_schema(
    summary="Add a member, or change a member's role (the project's admins and staff)",
    request=inline_serializer(
        "MemberSet",
        {"user": serializers.CharField(), "role": serializers.ChoiceField(choices=["viewer", "editor", "admin"])},
    ),
    responses={200: OpenApiTypes.OBJECT},
)
@api_view(["POST"])
def member_set(request, slug: str):
    project = project_for(request.user, slug)
    data = request.data if isinstance(request.data, dict) else {}
    try:
        membership = services.member_set(
            by=request.user, project=project, username=data.get("user"), role=data.get("role", "viewer")
        )
    except RequestError as exc:
        raise drf_error(exc) from None
    return Response({"user": membership.user.username, "role": membership.role})


@extend_schema(summary="Remove a member: they lose sight of the project's rows at once", responses={204: None})
@api_view(["DELETE"])
def member_remove(request, slug: str, username: str):
    try:
        services.member_remove(by=request.user, project=project_for(request.user, slug), username=username)
    except RequestError as exc:
        raise drf_error(exc) from None
    return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(
    summary="Put a dataset, run, search, benchmark or uploaded weights into a project, or take it out",
    description="Only the object's owner (or staff), and only into a project they are a member of. "
    '`"project": null` takes it out: it is its owner\'s alone again.',
    request=inline_serializer(
        "Share",
        {
            "kind": serializers.ChoiceField(choices=["dataset", "run", "search", "benchmark", "weights"]),
            "id": serializers.IntegerField(),
            "project": serializers.CharField(allow_null=True, help_text="a project's slug, or null"),
        },
    ),
    responses={200: OpenApiTypes.OBJECT, 404: error("No such object, or not one you may see.")},
)
@api_view(["POST"])
def share(request):
    data = request.data if isinstance(request.data, dict) else {}
    try:
        row = services.share(
            by=request.user, kind=data.get("kind"), pk=data.get("id"), project_slug=data.get("project")
        )
    except RequestError as exc:
        raise drf_error(exc) from None
    project = row.project.slug if row.project_id else None
    return Response({"kind": data["kind"], "id": row.pk, "project": project})


@extend_schema(
    methods=["GET"],
    summary="GPU-hour quotas you may read (staff: all), each with its use in the current period",
)
@extend_schema(
    methods=["PUT"],
    summary="Set a user's or a project's GPU-hours per period (staff)",
    request=inline_serializer(
        "QuotaSet",
        {
            "user": serializers.CharField(required=False, help_text="a username (or project)"),
            "project": serializers.CharField(required=False, help_text="a project's slug (or user)"),
            "gpu_hours": serializers.FloatField(),
            "period": serializers.ChoiceField(choices=["month", "rolling"], required=False, default="month"),
            "window_days": serializers.IntegerField(required=False, help_text="rolling: the window's days (30)"),
        },
    ),
    responses={200: OpenApiTypes.OBJECT},
)
@extend_schema(
    methods=["DELETE"],
    summary="Clear a user's or a project's quota (staff)",
    parameters=[OpenApiParameter("user", str), OpenApiParameter("project", str)],
    responses={204: None},
)
@api_view(["GET", "PUT", "DELETE"])
def quota_list(request):
    try:
        if request.method == "PUT":
            data = request.data if isinstance(request.data, dict) else {}
            fields = {key: data[key] for key in ("gpu_hours", "period", "window_days") if key in data}
            quota = services.quota_set(
                by=request.user, username=data.get("user"), project_slug=data.get("project"), **fields
            )
            return Response(usage(quota))
        if request.method == "DELETE":
            params = request.query_params
            services.quota_clear(by=request.user, username=params.get("user"), project_slug=params.get("project"))
            return Response(status=status.HTTP_204_NO_CONTENT)
    except RequestError as exc:
        raise drf_error(exc) from None
    return Response({"results": [usage(quota) for quota in quotas_for(request.user)]})
