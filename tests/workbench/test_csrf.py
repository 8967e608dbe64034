"""Every view that changes state refuses a POST without a CSRF token.

Walks the whole URL configuration, so views added later are covered without editing this test.
"""

import uuid

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.conftest import PASSWORD

# Endpoints that are not protected by a session and so need no CSRF token: credentials in the
# body are the proof (the token endpoint), or they only read.
NO_SESSION_STATE = {"api/auth/token/"}

# Fixed, not random: the parallel suite's processes must collect the same test ids.
SAMPLE_BY_CONVERTER = {"int": "1", "uuid": str(uuid.UUID(int=1)), "path": "x", "str": "x", "slug": "x"}


def concrete_urls(resolver: URLResolver = None, prefix: str = "") -> list[str]:
    resolver = resolver or get_resolver()
    urls = []
    for entry in resolver.url_patterns:
        route = prefix + _fill(entry.pattern)
        if isinstance(entry, URLResolver):
            urls.extend(concrete_urls(entry, route))
        elif isinstance(entry, URLPattern) and route is not None:
            urls.append(route)
    return urls


def _fill(pattern) -> str:
    route = getattr(pattern, "_route", None)
    if route is None:  # a regex pattern (the admin's): use a plain sample
        return str(pattern.regex.pattern).lstrip("^").rstrip("$").replace("\\", "").split("(")[0]
    for name, converter in pattern.converters.items():
        kind = type(converter).__name__.replace("Converter", "").lower()
        for marker in (f"<{kind}:{name}>", f"<{name}>"):
            route = route.replace(marker, SAMPLE_BY_CONVERTER.get(kind, "1"))
    return route


@pytest.fixture
def csrf_client(owner):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    return client


def test_it_finds_the_state_changing_views():
    urls = concrete_urls()
    for expected in ("accounts/logout/", "accounts/password/", "setup/", "api/tasks/probe/"):
        assert expected in urls


@pytest.mark.parametrize("url", [u for u in concrete_urls() if u not in NO_SESSION_STATE])
def test_it_refuses_posts_without_a_csrf_token(csrf_client, url):
    response = csrf_client.post("/" + url, {"username": "alice", "password": PASSWORD})
    assert response.status_code in (403, 404), f"/{url} answered {response.status_code}"
    if response.status_code == 404:
        # Only URL samples that match no route may 404; a matched view must refuse with 403.
        from django.urls import Resolver404, resolve

        with pytest.raises(Resolver404):
            resolve("/" + url)


def test_it_refuses_a_login_post_without_a_csrf_token(owner):
    client = Client(enforce_csrf_checks=True)
    response = client.post("/accounts/login/", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 403
