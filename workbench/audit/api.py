"""GET /api/audit/: the audit trail for staff, newest first, with filters."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.decorators import api_view
from rest_framework.pagination import PageNumberPagination

from workbench.audit.selectors import audit_for, entry_json
from workbench.core.adapters import drf_error
from workbench.core.errors import RequestError


@extend_schema(
    summary="The audit trail (staff): every change of state, who, when, from where, before and after",
    parameters=[
        OpenApiParameter("user", str, description="a username"),
        OpenApiParameter("action", str, description="an action or its prefix: run.abort, run., signin"),
        OpenApiParameter("kind", str, description="the target's kind: run, dataset, project..."),
        OpenApiParameter("id", str, description="the target's id (with kind)"),
        OpenApiParameter("door", str, enum=["page", "api", "cli", "system"]),
        OpenApiParameter("since", str, description="a date (2026-12-01) or an ISO time"),
        OpenApiParameter("page", int),
    ],
)
@api_view(["GET"])
def audit_list(request):
    try:
        rows = audit_for(request.user, request.query_params)
    except RequestError as error:
        raise drf_error(error) from None
    paginator = PageNumberPagination()
    page = paginator.paginate_queryset(rows, request)
    return paginator.get_paginated_response([entry_json(entry) for entry in page])
