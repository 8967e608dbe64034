"""Pause and resume on the run page in Chromium: pausing says that the run's devices go back to
the queue, and the resumed run says where it stands in the queue."""

from __future__ import annotations

import pytest

from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from tests.workbench.runs.conftest import parked_host
from tests.workbench.runs.web.test_e2e_live import off_the_loop
from workbench.runs.devices import DeviceRequest
from workbench.runs.lifecycle import run_finish, run_transition
from workbench.runs.models import Run
from workbench.runs.services import run_create

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_it_says_pausing_frees_the_devices_and_where_the_resumed_run_waits(live_server_url, page, owner):
    dataset = make_dataset_row(owner, name="digits")
    # Eight GPUs: no worker of the suite has them, so nothing but this test moves the run.
    run = run_create(owner=owner, dataset=dataset, name="paused one", network="lenet", config={"epochs": 3},
                     device_request=DeviceRequest.gpus(8))  # fmt: skip
    host = parked_host()
    off_the_loop(run_transition, run=run, to_state=Run.State.RUNNING, from_states=[Run.State.QUEUED],
                 reason="go", host=host, host_boot_id=host.boot_id)  # fmt: skip
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    page.wait_for_function("document.querySelector('#stream-state').textContent.startsWith('live')")
    assert "devices go back to the queue" in page.get_attribute("#run-pause", "title")

    page.click("#run-pause")
    page.wait_for_selector("#run-pause-note:not([hidden])")
    # "Pausing: ... gives its devices back to the queue; other runs may start on them", unless the
    # page already heard the run is paused (a busy machine): then the paused words, which say it too.
    note = page.inner_text("#run-pause-note")
    assert "gives its devices" in note or note.startswith("Paused: the run holds no devices"), note
    assert "other runs may" in note
    # The trainer saved its checkpoint and stopped (the worker's part, done here).
    off_the_loop(run_finish, run=run, to_state=Run.State.PAUSED, reason="paused by the user")
    page.wait_for_function("document.querySelector('#run-state .status').textContent === 'paused'")
    assert page.inner_text("#run-pause-note").startswith("Paused: the run holds no devices")

    page.click("#run-resume")
    # Its place among whatever else waits in the suite's shared queue (other tests' workers may
    # hold runs of their own there): a position, never the "–" of a run that is not queued.
    page.wait_for_function("/^position \\d+ of \\d+/.test(document.getElementById('run-queue').textContent)")
    assert page.is_hidden("#run-pause-note")
