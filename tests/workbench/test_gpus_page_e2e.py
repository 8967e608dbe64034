"""The GPUs page in Chromium: a simulated GPU held by a run says "in use (simulated)" (it has no
counters, so no measured-looking 0 %), and the probe counts what the table lists."""

from __future__ import annotations

import pytest

from datasets.models import Dataset
from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from workbench.runs.services import run_create
from workbench.workers.models import Device
from workbench.workers.simulation import simulate_hosts

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

UTILISATION = """(host) => [...document.querySelectorAll('#workers section')]
  .filter((s) => s.querySelector('h2').textContent.startsWith(host))
  .flatMap((s) => [...s.querySelectorAll('tbody tr')].map((r) => [r.cells[0].textContent, r.cells[3].textContent]))"""


def test_it_shows_a_held_simulated_gpu_as_in_use_not_as_zero_percent(live_server_url, page, owner):
    (host,) = simulate_hosts(hosts=1, gpus_per_host=2, prefix="shown")
    dataset = make_dataset_row(owner, name="d", status=Dataset.Status.BUILDING)
    run = run_create(owner=owner, dataset=dataset, name="r", network="lenet", config={}, device_request={"kind": "cpu"})
    Device.objects.filter(host=host, kind="gpu", index=0).update(run=run)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/gpus/")
    expected = [["GPU 0", "in use (simulated)"], ["GPU 1", "idle (simulated)"]]
    rendered = page.evaluate(UTILISATION, host.hostname)
    assert [row for row in rendered if row[0].startswith("GPU")] == expected, rendered
    # The table the page redraws every 5 s says the same.
    page.evaluate("document.querySelectorAll('#workers tbody td').forEach((td) => { td.textContent = ''; })")
    page.wait_for_function("document.querySelector('#workers tbody td').textContent !== ''", timeout=15_000)
    redrawn = page.evaluate(UTILISATION, host.hostname)
    assert [row for row in redrawn if row[0].startswith("GPU")] == expected, redrawn


def test_it_counts_in_the_probe_what_the_table_lists(live_server_url, celery_worker, page, owner):
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/gpus/")
    page.click("#probe")
    page.wait_for_function("document.querySelector('#probe-result').textContent.includes('answered')", timeout=60_000)
    # The suite's worker offers 2 simulated GPUs and its CPU, as its heartbeat (the table) lists them.
    assert page.inner_text("#probe-result").endswith("answered: 3 devices: 2 simulated GPUs, 1 CPU.")
