"""The search page in Chromium: the trials table and Optuna's plots, brought up to date when a
trial reports its validation and when the search starts a trial (over its websockets, not by polling)."""

from __future__ import annotations

import pytest

from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from tests.workbench.runs.conftest import TINY_CONFIG
from tests.workbench.runs.web.test_e2e_live import off_the_loop
from workbench.runs.lifecycle import run_events_append
from workbench.runs.models import Run
from workbench.searches.models import BestRun, Trial
from workbench.searches.services import search_advance, search_create

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SPACE = {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1}}


def _queued_search(owner, dataset, *, trials: int, parallel: int):
    """A search with its first trials started, whose runs queue and never start (the dataset
    builds): only the test moves them."""
    dataset.status = "building"
    dataset.save()
    search = search_create(
        owner=owner, dataset=dataset, name="live", network="lenet", config=TINY_CONFIG, space=SPACE, gpus="cpu",
        trials=trials, parallel=parallel, sampler="random", seed=5, pruner="none",
    )  # fmt: skip
    return search_advance(search_id=search.pk)


def test_it_shows_a_trials_report_live_with_optunas_plots(live_server_url, page, owner, dataset, housekeeping_held):
    # housekeeping_held: the suite's worker, once started on this process, rewrote the wait reason set below.
    search = _queued_search(owner, dataset, trials=3, parallel=2)
    first = search.trials.get(number=0)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/searches/{search.pk}/")
    page.wait_for_selector("#trials tbody input[type=checkbox] >> nth=1")  # the table, drawn by the page's script
    page.wait_for_selector("#plot-history .js-plotly-plot")
    assert page.inner_text("#search-plots-note") == ""  # "Loading…" until the plots came
    assert page.locator("#plot-history .gtitle").count() == 0  # the card's heading names it, once
    assert page.inner_text("#search-budget") == "2 of 3 trials, 0.0 GPU-hours"

    # The trial's run stores a validation, as the worker's ingest does: the search hears it
    # (report to Optuna), the run's socket carries it, and the page reads the search again.
    validation = {"type": "validation", "step": 3, "epoch": 1.0, "val_loss": 0.75, "top1": 0.5, "time": 1.0}
    off_the_loop(run_events_append, run_id=first.run_id, events=[validation])
    row = '#trials tbody tr[data-number="0"]'
    page.wait_for_function(f"document.querySelector('{row}').innerText.includes('0.7500')", timeout=20000)
    cells = page.locator(f"{row} td").all_inner_texts()
    # Its run is still queued (the dataset builds): the trial says so, not "running"; lr is short.
    short = float(f"{first.params['lr']:.4g}")
    assert cells[2:6] == ["queued", f"lr={short}", "0.7500", "1"], cells
    page.wait_for_selector("#plot-intermediate .js-plotly-plot")
    # Why a trial's run waits changes without an event: the page reads it again while it waits.
    second = search.trials.get(number=1)
    Run.objects.filter(pk=second.run_id).update(wait_reason="behind 3 runs of higher priority")
    waiting = '#trials tbody tr[data-number="1"]'
    page.wait_for_function(f"document.querySelector('{waiting}').innerText.includes('behind 3 runs')", timeout=20000)

    # The trial's run ends without a word on its own socket (the row is set directly): the search's
    # pass settles the trial and starts the third, and the search's socket tells the page.
    Run.objects.filter(pk=first.run_id).update(state=Run.State.DONE)
    off_the_loop(search_advance, search_id=search.pk)
    page.wait_for_selector('#trials tbody tr[data-number="2"]', timeout=20000)
    assert page.locator(f"{row} td").all_inner_texts()[2] == "complete"
    assert page.inner_text("#search-budget") == "3 of 3 trials, 0.0 GPU-hours"
    assert errors == []


def test_it_queues_the_best_once_however_often_it_is_clicked(live_server_url, page, owner, dataset):
    search = _queued_search(owner, dataset, trials=2, parallel=1)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/searches/{search.pk}/")
    page.wait_for_selector("#trials tbody input[type=checkbox]")
    # Running, nothing complete: pause and abort are offered, resume and train-best are not.
    offered = {name: page.is_enabled(f"#search-{name}") for name in ("pause", "resume", "abort", "train-best")}
    assert offered == {"pause": True, "resume": False, "abort": True, "train-best": False}
    # and they look so: a disabled button was drawn as a solid primary one (the new user's walk)
    faded = "(id) => Number(getComputedStyle(document.getElementById(id)).opacity) < 0.6"
    assert page.evaluate(faded, "search-resume") and not page.evaluate(faded, "search-pause")

    Trial.objects.filter(search=search, number=0).update(state=Trial.State.COMPLETE, value=0.5)
    off_the_loop(search_advance, search_id=search.pk)  # its socket pings; the page reads the search again
    page.wait_for_function("!document.getElementById('search-train-best').disabled", timeout=20000)
    posts = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    # Three clicks in one go: the first disables every button until its answer.
    busy = page.evaluate(
        """() => { const button = document.getElementById('search-train-best');
        button.click(); const during = [button.disabled, document.getElementById('search-message').textContent];
        button.click(); button.click(); return during; }"""
    )
    assert busy == [True, "Queuing a full run of the best trial…"]
    page.wait_for_url(f"{live_server_url}/runs/*/", timeout=20000)
    assert len([url for url in posts if url.endswith("/train-best/")]) == 1
    (best,) = BestRun.objects.filter(search=search)
    assert page.url.endswith(f"/runs/{best.run_id}/")


def test_it_offers_the_datasets_tasks_objectives_in_the_search_card(live_server_url, page, owner, dataset):
    # The card listed every task's metrics ("Miou", "Map 50" on a classifier's dataset).
    masks = make_dataset_row(owner, name="masks", task="segmentation", image_width=8, image_height=8, channels=3)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/new/?search=1")
    options = "[...document.querySelectorAll('[name=search-objective] option')]"
    shown = f"{options}.filter((o) => !o.hidden).map((o) => o.text)"
    page.select_option("[name=dataset]", str(dataset.pk))
    assert page.evaluate(shown) == ["the task's own (val. loss for a classifier)", "val. loss", "top-1", "top-5"]
    page.select_option("[name=search-objective]", "top5")
    page.select_option("[name=dataset]", str(masks.pk))
    assert page.evaluate(shown)[1:] == ["val. loss", "mIoU", "pixel accuracy", "Dice"]
    assert page.input_value("[name=search-objective]") == ""  # top-5 is no segmenter's: the task's own
    assert errors == []
