"""Error pages in the workbench's layout with a way back: a stale or shared link (404), an action
not allowed (403), an expired form (CSRF failure) and a server error (500); the API keeps JSON."""

from __future__ import annotations

import pytest

from tests.conftest import log_in


def assert_in_layout(body: str, heading: str) -> None:
    assert 'href="/static/workbench/base.css"' in body and 'class="topbar"' in body
    assert f"<h1>{heading}</h1>" in body
    assert 'id="ways-back"' in body and 'href="/"' in body


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_answers_a_stale_link_with_a_styled_page_and_a_way_back(live_server_url, page, owner):
    log_in(page, live_server_url, owner.username)
    response = page.goto(f"{live_server_url}/runs/987654/")
    assert response.status == 404
    assert page.inner_text("h1") == "This page does not exist"
    assert page.locator(".topbar nav a[href='/runs/']").is_visible()  # the user's own menu
    # The stylesheet applies: the message sits on a card, not on a bare white page.
    assert page.eval_on_selector("#error-page", "el => getComputedStyle(el).borderRadius") == "6px"
    page.click("#ways-back >> text=Go to the dashboard")
    page.wait_for_url(f"{live_server_url}/")
    assert page.locator("h1").count() and page.inner_text("h1") != "This page does not exist"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_explains_an_expired_form_in_the_layout(live_server_url, page, owner):
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/accounts/password/")
    # The page stayed open while the token changed (signed out and in again in another tab).
    page.context.add_cookies([{"name": "csrftoken", "value": "x" * 32, "url": live_server_url}])
    with page.expect_navigation():
        page.click(".topbar form button[type=submit]")  # Log out
    assert page.inner_text("h1") == "This form has expired"
    assert "reload the page and send the form again" in page.inner_text("#error-page")
    assert page.locator(".topbar nav a[href='/datasets/']").is_visible()
    page.click("#ways-back >> text=Your runs")
    page.wait_for_url(f"{live_server_url}/runs/")


@pytest.mark.django_db
def test_it_shows_server_errors_and_refusals_in_the_layout(owner_client, settings):
    settings.ROOT_URLCONF = "tests.workbench.error_urls"
    owner_client.raise_request_exception = False

    crashed = owner_client.get("/crash/")
    assert crashed.status_code == 500
    body = crashed.content.decode()
    assert_in_layout(body, "Something went wrong on the server")
    assert "/srv/workbench" not in body and "RuntimeError" not in body

    api = owner_client.get("/api/crash/")
    assert api.status_code == 500 and api.json() == {
        "detail": "Internal server error; the details are in the server log."
    }

    refused = owner_client.get("/refuse/")
    assert refused.status_code == 403
    assert_in_layout(refused.content.decode(), "You may not do this")
    assert "only staff can change a run&#x27;s priority" in refused.content.decode()

    missing = owner_client.get("/datasets/424242/")
    assert missing.status_code == 404
    assert_in_layout(missing.content.decode(), "This page does not exist")
    assert owner_client.get("/api/nothing-here/").json() == {"detail": "Not found."}
