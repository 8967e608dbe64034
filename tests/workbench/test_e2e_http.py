"""static/workbench/http.js in a real Chromium against daphne: the CSRF token that base.html
provides is the one sent, and a failure reads as the server's own words."""

from __future__ import annotations

import pytest

from tests.conftest import log_in

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# Runs `expression` (which may use `http`, the module) in the page: ["ok", value] or the error's
# [name, status, message].
CALL = """async (expression) => {
  const http = await import("/static/workbench/http.js");
  try { return ["ok", await eval(expression)]; }
  catch (error) { return [error.name, error.status, error.message]; }
}"""


@pytest.fixture
def signed_in(page, live_server_url, transactional_db, owner):
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/gpus/")
    return page


def test_it_sends_the_token_of_the_base_template_with_a_post(signed_in):
    # Accepted: the answer is the API's validation of the empty run, not a CSRF refusal.
    name, status, message = signed_in.evaluate(CALL, 'http.sendJSON("/api/runs/", { body: {} })')
    assert (name, status) == ("HttpError", 400)
    signed_in.evaluate("document.querySelector('meta[name=csrf-token]').remove()")
    refused = signed_in.evaluate(CALL, 'http.sendJSON("/api/runs/", { body: {} })')
    assert refused[:2] == ["HttpError", 403] and "CSRF" in refused[2]


def test_it_turns_field_errors_into_field_message_text(signed_in):
    name, status, message = signed_in.evaluate(CALL, 'http.sendJSON("/api/runs/", { body: {} })')
    assert message == "dataset: This field is required.; network: This field is required."


def test_it_raises_drfs_detail_as_the_message(signed_in):
    assert signed_in.evaluate(CALL, 'http.getJSON("/api/runs/999999/")') == [
        "HttpError",
        404,
        "No Run matches the given query.",
    ]


def test_it_raises_the_status_text_when_the_answer_is_not_json(signed_in):
    assert signed_in.evaluate(CALL, 'http.getJSON("/static/workbench/no-such-file.js")') == [
        "HttpError",
        404,
        "Not Found",
    ]


def test_it_says_the_session_may_have_ended_when_a_success_is_not_json(signed_in):
    name, status, message = signed_in.evaluate(CALL, 'http.getJSON("/accounts/login/")')
    assert (name, status) == ("HttpError", 200) and "session" in message


def test_it_returns_the_parsed_answer(signed_in):
    name, body = signed_in.evaluate(CALL, 'http.getJSON("/api/me/")')
    assert name == "ok" and body["username"] == "alice"
