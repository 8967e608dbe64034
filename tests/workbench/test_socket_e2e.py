"""static/workbench/socket.js in a real Chromium against daphne and Redis: the one module every page
opens its websocket with. A lost socket is opened again by itself, and where the page's protocol
replays (a run's), the last sequence number the page holds is what the reconnect asks from."""

from __future__ import annotations

import threading
import time

import pytest

from datasets.models import Dataset
from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from workbench.runs.lifecycle import run_events_append
from workbench.runs.services import run_create

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Opens `path` as a page would: every message kept in `window.got`, each open's `reconnected` in
# `window.opens`, and `window.held` as the last sequence number the page holds.
OPEN = """async ({ path, stopOn }) => {
  const { openSocket } = await import("/static/workbench/socket.js");
  Object.assign(window, { got: [], opens: [], closes: [], held: 0 });
  window.stream = openSocket(path, {
    since: () => window.held,
    onOpen: ({ reconnected }) => window.opens.push(reconnected),
    onMessage: (message) => window.got.push(message),
    onClose: (closed, { retrying }) => window.closes.push([closed.code, retrying]),
    keepTrying: (closed) => closed.code !== stopOn,
  });
}"""
REPLAYS = "window.got.filter((m) => m.type === 'replay').map((m) => [m.since, m.last_seq, m.events.length])"


def metrics(step: int) -> dict:
    return {"type": "metrics", "time": time.time(), "step": step, "epoch": 0, "images_seen": step, "loss": 1.0}


def append_events(run, count: int) -> None:
    # From a thread of its own: Playwright's loop runs in this one, and the append publishes to the
    # channel layer with async_to_sync.
    worker = threading.Thread(
        target=run_events_append, kwargs={"run_id": run.pk, "events": [metrics(n) for n in range(1, count + 1)]}
    )
    worker.start()
    worker.join(30)


@pytest.fixture
def run_page(live_server_url, page, owner):
    dataset = make_dataset_row(owner, status=Dataset.Status.BUILDING)  # unschedulable: the run stays queued
    run = run_create(owner=owner, dataset=dataset, name="socket", network="lenet", config={},
                     device_request={"kind": "cpu"})  # fmt: skip
    append_events(run, 3)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/gpus/")  # any page of the workbench: the module is imported alone
    return run, page


def test_it_asks_from_the_last_sequence_number_held_on_every_reconnect(run_page):
    run, page = run_page
    page.evaluate(OPEN, {"path": f"/ws/runs/{run.pk}/", "stopOn": 4404})
    page.wait_for_function(f"({REPLAYS}).length === 1")
    [(since, last, count)] = page.evaluate(REPLAYS)
    assert (since, count) == (0, last) and last >= 3  # the run's own status events, then the three
    page.evaluate(f"window.held = {last}; window.stream.socket.close()")  # as if the page applied them all
    page.wait_for_function(f"({REPLAYS}).length === 2")
    assert page.evaluate(REPLAYS)[1] == [last, last, 0]  # asked from there: nothing twice
    assert page.evaluate("window.opens") == [False, True]
    assert page.evaluate("window.closes.map(([code, retrying]) => retrying)") == [True]


def test_it_stops_when_the_page_says_the_socket_is_over(run_page):
    run, page = run_page
    page.evaluate(OPEN, {"path": f"/ws/runs/{run.pk}/", "stopOn": 4404})
    page.wait_for_function(f"({REPLAYS}).length === 1")
    deleting = threading.Thread(target=run.delete)  # off the loop, as append_events
    deleting.start()
    deleting.join(30)
    page.evaluate("window.stream.catchUp()")  # the consumer answers with a 4404 close
    page.wait_for_function("window.closes.length === 1")
    assert page.evaluate("window.closes") == [[4404, False]]
