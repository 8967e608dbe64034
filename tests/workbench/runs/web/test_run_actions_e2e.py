"""The run page's actions in Chromium: one request at a time, every action button disabled and
the clicked one saying what it does until the answer comes; then the buttons the new state allows."""

from __future__ import annotations

import pytest

from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from tests.workbench.runs.web.test_e2e_live import off_the_loop
from workbench.runs.models import Run
from workbench.runs.services import run_create

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_it_sends_one_pause_however_often_it_is_clicked(live_server_url, page, owner):
    dataset = make_dataset_row(owner, name="digits", status="building")  # the run stays queued
    made = []  # run_create publishes: off Playwright's loop
    off_the_loop(lambda **request: made.append(run_create(**request)), owner=owner, dataset=dataset, name="waits",
                 network="lenet", config={}, device_request={"kind": "cpu"})  # fmt: skip
    (run,) = made
    errors, posts = [], []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    during = page.evaluate(
        """() => { const pause = document.getElementById('run-pause'); pause.click();
        const seen = [pause.textContent, ...['run-pause', 'run-resume', 'run-abort'].map(
          (id) => document.getElementById(id).disabled)];
        pause.click(); pause.click(); return seen; }"""
    )
    assert during == ["Pausing…", True, True, True]
    # The socket may say "paused" before the request's answer: the buttons wait for the answer.
    page.wait_for_function("document.querySelector('#run-state .status').textContent === 'paused'")
    page.wait_for_function("!document.getElementById('run-resume').disabled")
    assert [url for url in posts if "/pause" in url] == [f"{live_server_url}/api/runs/{run.pk}/pause/"]
    assert Run.objects.get(pk=run.pk).state == Run.State.PAUSED
    assert page.is_hidden("#run-pause") and page.is_enabled("#run-resume") and page.is_enabled("#run-abort")
    assert page.inner_text("#run-pause") == "Pause" and page.is_hidden("#run-action-error")
    assert errors == []
