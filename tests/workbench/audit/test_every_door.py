"""Nothing that changes state goes unrecorded: every operation of the API with an unsafe method
(from the urlconf, as the OpenAPI schema lists them) and every page a form posts to leaves an
audit row, whatever it answers, or is excused in workbench/audit/middleware.NOT_CHANGES."""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.authtoken.models import Token

from tests.workbench.test_api_bodies import CASES, _url
from tests.workbench.test_api_bodies import objects as objects  # noqa: F401  (the fixture, shared)
from workbench.audit.middleware import NOT_CHANGES
from workbench.audit.models import AuditEntry


def _page_routes(patterns=None, prefix: str = "") -> list[tuple[str, str]]:
    """(route, name) of every named URL outside /api/ and the admin (the admin keeps its own log)."""
    routes = []
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(entry.pattern)
        if route.startswith(("api/", "admin/")):
            continue
        if isinstance(entry, URLResolver):
            routes += _page_routes(entry.url_patterns, route)
        elif isinstance(entry, URLPattern) and entry.name and "<uuid" not in route:
            routes.append((route, entry.name))
    return routes


PAGES = _page_routes()


def _page_url(route: str, objects: dict) -> str:
    """The route with each id filled: the object of the segment before it when there is one
    (runs/<pk> -> the run), else 1 (a second benchmark to compare with, say)."""

    def fill(match: re.Match) -> str:
        segment = route[: match.start()].rstrip("/").rsplit("/", 1)[-1]
        return str(objects.get(segment, 1))

    return "/" + re.sub(r"<(?:\w+:)?\w+>", fill, route)


def test_it_walks_every_api_operation_and_every_page():
    assert {"api/runs/<int:pk>/abort/", "api/share/", "api/projects/"} <= {route for route, _ in CASES}
    assert {"run-abort", "dataset-delete", "project-share", "audit"} <= {name for _, name in PAGES}
    assert set(NOT_CHANGES) <= {name for _, name in PAGES} | {"api-token"}


@pytest.mark.django_db
@pytest.mark.parametrize(("route", "method"), CASES)
def test_it_records_every_api_operation_that_may_change_state(client, owner, objects, route, method):
    if route == "api/auth/token/":
        pytest.skip(NOT_CHANGES["api-token"])
    token = Token.objects.create(user=owner)
    before = AuditEntry.objects.count()
    response = getattr(client, method)(
        _url(route, objects), data="{}", content_type="application/json", HTTP_AUTHORIZATION=f"Token {token.key}"
    )
    assert AuditEntry.objects.count() > before, f"{method.upper()} /{route} ({response.status_code}) wrote no audit row"


@pytest.mark.django_db
@pytest.mark.parametrize(("route", "name"), PAGES)
def test_it_records_every_post_to_a_page(client, owner, objects, route, name):
    if name in NOT_CHANGES:
        pytest.skip(NOT_CHANGES[name])
    client.force_login(owner)
    before = AuditEntry.objects.exclude(action="signin").count()
    response = client.post(_page_url(route, objects), {})
    written = AuditEntry.objects.exclude(action="signin").count()
    assert written > before, f"POST /{route} ({response.status_code}) wrote no audit row"
