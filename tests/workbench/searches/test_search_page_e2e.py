"""The search page in Chromium: the trials table and Optuna's plots, brought up to date when a
trial reports its validation and when the search starts a trial (over its websockets, not by polling)."""

from __future__ import annotations

import pytest

from tests.conftest import log_in
from tests.workbench.runs.conftest import TINY_CONFIG
from tests.workbench.runs.web.test_e2e_live import off_the_loop
from workbench.runs.lifecycle import run_events_append
from workbench.runs.models import Run
from workbench.searches.services import search_advance, search_create

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SPACE = {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1}}


def test_it_shows_a_trials_report_live_with_optunas_plots(live_server_url, page, owner, dataset):
    dataset.status = "building"  # its trial runs queue and never start: only this test moves them
    dataset.save()
    search = search_create(
        owner=owner, dataset=dataset, name="live", network="lenet", config=TINY_CONFIG, space=SPACE, gpus="cpu",
        trials=3, parallel=2, sampler="random", seed=5, pruner="none",
    )  # fmt: skip
    search = search_advance(search_id=search.pk)
    first = search.trials.get(number=0)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/searches/{search.pk}/")
    page.wait_for_selector("#trials tbody input[type=checkbox] >> nth=1")  # the table, drawn by the page's script
    page.wait_for_selector("#plot-history .js-plotly-plot")
    assert page.inner_text("#search-budget") == "2 of 3 trials, 0.0 GPU-hours"

    # The trial's run stores a validation, as the worker's ingest does: the search hears it
    # (report to Optuna), the run's socket carries it, and the page reads the search again.
    validation = {"type": "validation", "step": 3, "epoch": 1.0, "val_loss": 0.75, "top1": 0.5, "time": 1.0}
    off_the_loop(run_events_append, run_id=first.run_id, events=[validation])
    row = '#trials tbody tr[data-number="0"]'
    page.wait_for_function(f"document.querySelector('{row}').innerText.includes('0.7500')", timeout=20000)
    cells = page.locator(f"{row} td").all_inner_texts()
    assert cells[2:6] == ["running", f"lr={first.params['lr']}", "0.7500", "1"], cells
    page.wait_for_selector("#plot-intermediate .js-plotly-plot")

    # The trial's run ends without a word on its own socket (the row is set directly): the search's
    # pass settles the trial and starts the third, and the search's socket tells the page.
    Run.objects.filter(pk=first.run_id).update(state=Run.State.DONE)
    off_the_loop(search_advance, search_id=search.pk)
    page.wait_for_selector('#trials tbody tr[data-number="2"]', timeout=20000)
    assert page.locator(f"{row} td").all_inner_texts()[2] == "complete"
    assert page.inner_text("#search-budget") == "3 of 3 trials, 0.0 GPU-hours"
    assert errors == []
