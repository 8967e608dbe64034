"""The run page in Chromium keeps no stale words: the "is queued" message of the submit goes once
the run moves on, and a finished run shows all its epochs, not the last metric's 2.93."""

from __future__ import annotations

import time

import pytest

from datasets.models import Dataset
from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from tests.support.trainer_data import make_dataset_folder
from tests.workbench.runs.conftest import parked_host
from tests.workbench.runs.web.test_e2e_live import off_the_loop
from tests.workbench.runs.web.test_live_views import early_stopped, make_run
from workbench.runs.lifecycle import run_events_append, run_finish, run_transition
from workbench.runs.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_it_drops_the_queued_message_and_shows_every_epoch_when_done(live_server_url, page, owner):
    dataset = make_dataset_row(
        owner, name="digits", image_width=8, image_height=8, channels=1,
        labels=["0", "1", "2"], splits={"train": {"count": 240}, "val": {"count": 60}},
    )  # fmt: skip
    make_dataset_folder(dataset.path)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/new/?dataset={dataset.pk}")
    # Eight GPUs: no worker of the suite has them, so the run waits until this test moves it.
    page.check("input[name=device_mode][value=count]")
    page.fill("#id_gpu_count", "8")
    page.fill("#id_epochs", "3")
    page.fill("#id_batch_size", "8")
    page.click("#create-run")
    page.wait_for_url(lambda url: "/runs/new/" not in url)
    run = Run.objects.get()
    assert f"Run #{run.pk}" in page.inner_text("main > .messages") and "is queued" in page.inner_text("main")
    page.wait_for_function("document.querySelector('#stream-state').textContent.startsWith('live')")

    host = parked_host()
    off_the_loop(run_transition, run=run, to_state=Run.State.RUNNING, from_states=Run.PENDING_STATES,
                 reason="go", host=host, host_boot_id=host.boot_id)  # fmt: skip
    page.wait_for_function("document.querySelector('#run-state .status').textContent === 'running'")
    assert page.locator("main > .messages").count() == 0

    events = [{"type": "metrics", "time": time.time(), "step": 88, "epoch": 2.93, "loss": 0.5, "lr": 0.01}]
    off_the_loop(run_events_append, run_id=run.pk, events=events)
    page.wait_for_function("document.getElementById('run-epoch').textContent === '2.93 of 3'")
    off_the_loop(run_finish, run=run, to_state=Run.State.DONE, reason="finished")
    page.wait_for_function("document.querySelector('#run-state .status').textContent === 'done'")
    assert page.inner_text("#run-epoch") == "3 of 3"


def test_it_keeps_an_early_stopped_runs_stop_progress_and_best_once_its_history_is_replayed(
    live_server_url, page, owner
):
    # The page's script replays the events (a progress of 26.7 %, validations up to 96.40 %) and
    # reads the run (done: progress 1.0); it must still say what the server drew.
    dataset = make_dataset_row(owner, status=Dataset.Status.BUILDING)  # never started
    run = early_stopped(make_run(owner, dataset))
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    page.wait_for_function("window.runPage?.stream.replays > 0")  # a finished run's page does not say "live"
    assert page.inner_text("#run-epoch") == "stopped early at epoch 8 of 30"
    assert page.inner_text("#run-percent") == "27%"
    assert page.inner_text("#run-best") == "top-1 96.40% at epoch 8 (kept)"


def test_it_takes_delete_away_when_a_run_loaded_while_queued_starts_and_back_when_it_ends(live_server_url, page, owner):
    dataset = make_dataset_row(owner, status=Dataset.Status.BUILDING)  # never scheduled
    run = make_run(owner, dataset)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    page.wait_for_function("document.querySelector('#stream-state').textContent.startsWith('live')")
    assert page.is_visible("#run-delete")  # queued: it may go
    host = parked_host()
    off_the_loop(run_transition, run=run, to_state=Run.State.RUNNING, from_states=Run.PENDING_STATES,
                 reason="go", host=host, host_boot_id=host.boot_id)  # fmt: skip
    page.wait_for_function("document.querySelector('#run-state .status').textContent === 'running'")
    assert not page.is_visible("#run-delete")
    off_the_loop(run_finish, run=run, to_state=Run.State.ABORTED, reason="stopped")
    page.wait_for_function("document.querySelector('#run-state .status').textContent === 'aborted'")
    assert page.is_visible("#run-delete")
