"""The API docs are reachable from every page: a link in the header opens them."""

from __future__ import annotations

import pytest

from tests.conftest import log_in

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_it_links_the_api_docs_from_the_header(live_server_url, page, owner):
    log_in(page, live_server_url, owner.username)
    for path in ("/", "/runs/", "/datasets/"):
        page.goto(f"{live_server_url}{path}")
        assert page.get_attribute("#api-docs-link", "href") == "/api/docs/"
    page.click("#api-docs-link")
    page.wait_for_url("**/api/docs/")
    page.wait_for_selector("#swagger-ui .info", timeout=30_000)
