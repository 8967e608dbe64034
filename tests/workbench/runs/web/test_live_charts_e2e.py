"""The live run page in Chromium: every chart is drawn with its data without scrolling to it, and
system samples taken before the run's first metric have a place on the chart's x axis."""

from __future__ import annotations

import time

import pytest

from datasets.models import Dataset
from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from tests.workbench.runs.web.test_e2e_live import metrics, off_the_loop
from workbench.runs.lifecycle import run_events_append
from workbench.runs.services import run_create

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CHARTS = ["loss", "accuracy", "lr", "throughput", "gpu", "host"]
DRAWN = """(names) => names.every((name) => {
  const el = document.querySelector(`[data-chart=${name}]`);
  return (el.data || []).some((trace) => trace.x.some((x) => x !== null));
})"""
BELOW_FOLD = """(names) => names.filter((name) =>
  document.querySelector(`[data-chart=${name}]`).getBoundingClientRect().top > window.innerHeight)"""
HOST_X = "document.querySelector('[data-chart=host]').data[0].x"


def system(**position) -> dict:
    return {
        "type": "system", "time": time.time(), **position, "host_cpu_percent": 40.0, "process_cpu_percent": 95.0,
        "host_memory_percent": 30.0, "process_rss_mb": 250.0,
        "gpus": [{"index": 0, "name": "sim", "simulated": True, "cpu_percent": 90.0, "rss_mb": 240.0}],
    }  # fmt: skip


def stored_run(owner, events: list[dict]):
    dataset = make_dataset_row(owner, status=Dataset.Status.BUILDING)  # unschedulable
    # A run with a GPU (its samples are a simulated GPU's): a run on the CPU has no GPU chart.
    run = run_create(owner=owner, dataset=dataset, name="short", network="lenet", config={"batch_size": 16},
                     device_request={"kind": "count", "count": 1})  # fmt: skip
    off_the_loop(run_events_append, run_id=run.pk, events=events)
    return run


def test_it_draws_every_chart_with_its_data_without_scrolling(live_server_url, page, owner):
    # A sample from the run's first seconds as older runs stored it (no step, no epoch), the
    # metrics, a validation, and a sample at the run's latest metric.
    events = [system(), *(metrics(step) for step in range(1, 41))]
    events.append({"type": "validation", "time": time.time(), "step": 40, "epoch": 1.0, "val_loss": 0.9, "top1": 0.5})
    events.append(system(step=40, epoch=1.0, images_seen=640))
    run = stored_run(owner, events)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    below = page.evaluate(BELOW_FOLD, CHARTS)
    assert {"gpu", "host"} <= set(below)  # the check means something: these are out of view
    page.wait_for_function(DRAWN, arg=CHARTS, timeout=20_000)
    assert page.evaluate("window.scrollY") == 0
    # The sample before the first metric sits at the run's start on the epoch axis.
    assert page.evaluate(HOST_X) == [0, 1.0]
    page.select_option("#x-axis", "step")
    assert page.evaluate(HOST_X) == [0, 40]
    # The first screen still comes first: the loss chart was drawn before the charts below.
    marks = page.evaluate("Object.fromEntries(performance.getEntriesByType('mark').map((m) => [m.name, m.startTime]))")
    assert marks["drawn:loss"] < min(marks[f"drawn:{name}"] for name in below)


def test_it_shows_a_run_that_has_only_system_samples_so_far(live_server_url, page, owner):
    # The first seconds of a run: the sampler has written its first sample, no metric yet.
    run = stored_run(owner, [system(step=0, epoch=0.0, images_seen=0)])
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    page.wait_for_function(DRAWN, arg=["host", "gpu"], timeout=20_000)
    host = page.evaluate("document.querySelector('[data-chart=host]').data[0]")
    assert host["x"] == [0] and host["mode"] == "lines+markers"  # one point: a marker, not an invisible line
    page.wait_for_function("document.querySelector('#stream-state').textContent.startsWith('live')")
    # Live samples before the first metric (an older worker's, without a position) join it at 0.
    off_the_loop(run_events_append, run_id=run.pk, events=[system()])
    page.wait_for_function(f"{HOST_X}.length === 2")
    assert page.evaluate(HOST_X) == [0, 0]


def test_it_says_a_slow_runs_throughput_as_its_chart_draws_it(live_server_url, page, owner):
    # A CPU run at 0.3 images/s read "0 images/s" beside a chart at 0.3 (issue 33).
    run = stored_run(owner, [{**metrics(step), "images_per_sec": 0.3} for step in range(1, 4)])
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    page.wait_for_function("document.querySelector('#throughput-figure').textContent.includes('images/s')")
    assert page.inner_text("#throughput-figure").startswith("0.3 images/s")


def test_it_says_what_the_last_validation_found_while_the_run_trains(live_server_url, page, owner):
    # "the detector has not found anything yet" was only in the log while the header read a best mAP.
    note = "no box scored above 0.05 on the validation images: the detector has not found anything yet"
    run = stored_run(owner, [metrics(1)])
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    page.wait_for_function("document.querySelector('#stream-state').textContent.startsWith('live')")
    assert page.locator("#run-validation-notes").count() == 0
    warned = {"type": "log", "time": time.time(), "line": note, "level": "warning"}
    validation = {"type": "validation", "time": time.time(), "step": 2, "epoch": 0.05, "val_loss": 0.9, "top1": 0.5}
    off_the_loop(run_events_append, run_id=run.pk, events=[metrics(2), warned, validation])
    page.wait_for_selector("#run-validation-notes:not([hidden])")
    assert page.inner_text("#run-validation-notes") == f"At its last validation: {note}."
    off_the_loop(run_events_append, run_id=run.pk, events=[metrics(3), {**validation, "step": 3}])
    page.wait_for_selector("#run-validation-notes", state="hidden")
