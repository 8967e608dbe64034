"""The sign-in flow in a real Chromium against a real daphne."""

import pytest

from tests.conftest import PASSWORD

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def submit_login_form(page, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_load_state()


def test_it_logs_in_shows_the_dashboard_and_logs_out(page, live_server_url, transactional_db, owner):
    submit_login_form(page, live_server_url, "alice", PASSWORD)
    assert page.url == f"{live_server_url}/"
    assert page.locator("h1").inner_text() == "Home"
    assert page.get_by_text("No datasets yet").is_visible()
    assert page.locator(".username").inner_text() == "alice"
    page.click("text=Log out")
    page.wait_for_url(f"{live_server_url}/accounts/login/")
    page.goto(f"{live_server_url}/")
    assert page.url.startswith(f"{live_server_url}/accounts/login/")


def test_it_shows_an_error_for_a_wrong_password(page, live_server_url, transactional_db, owner):
    submit_login_form(page, live_server_url, "alice", "not the password")
    assert page.url.startswith(f"{live_server_url}/accounts/login/")
    assert "Please enter a correct username and password" in page.locator("[role=alert]").inner_text()


def test_it_redirects_an_anonymous_visit_to_login(page, live_server_url, transactional_db):
    page.goto(f"{live_server_url}/gpus/")
    assert page.url == f"{live_server_url}/accounts/login/?next=/gpus/"
    assert page.locator("h1").inner_text() == "Sign in"


def test_it_creates_the_first_admin_in_the_browser(page, live_server_url, transactional_db):
    page.goto(f"{live_server_url}/accounts/login/")
    page.click("text=Create the first (administrator) account")
    page.fill("#id_username", "root")
    page.fill("#id_password1", "a-long-passphrase-1")
    page.fill("#id_password2", "a-long-passphrase-1")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server_url}/")
    assert page.get_by_role("link", name="Admin").is_visible()
