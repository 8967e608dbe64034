"""The staff's audit page: the trail, newest first, 100 a page, with the API's filters."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import render
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from workbench.audit.models import AuditEntry
from workbench.audit.selectors import FILTERS, audit_for
from workbench.core.errors import RequestError


@require_GET
def audit_page(request):
    try:
        rows = audit_for(request.user, request.GET)
    except RequestError as error:
        messages.error(request, f"{error.field}: {error.message}")
        rows = audit_for(request.user, {})
    page = Paginator(rows, 100).get_page(request.GET.get("page"))
    query = {name: request.GET.get(name, "") for name in FILTERS}
    filters_query = urlencode({name: value for name, value in query.items() if value})
    context = {"page": page, "query": query, "filters_query": filters_query, "doors": AuditEntry.Door.choices}
    return render(request, "audit/audit.html", context)
