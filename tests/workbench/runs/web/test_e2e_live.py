"""The live run page in Chromium against a real daphne and Redis: charts grow in place while events
are stored, the controls redraw, a dropped socket catches up, and the state reaches done live."""

from __future__ import annotations

import threading
import time

import pytest

from datasets.models import Dataset
from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from tests.support.waiting import wait_for_state
from tests.workbench.runs.conftest import TINY_CONFIG, parked_host
from workbench.runs.lifecycle import run_events_append, run_finish, run_transition
from workbench.runs.models import Run
from workbench.runs.services import run_create, run_pause, run_resume, run_submit

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

STEPS = 240
POINTS = "i => document.querySelector(`[data-chart=${i.chart}]`).data?.[i.trace]?.x.length ?? 0"
STORE = "name => { const s = runPage.store.get(name); return s ? {seq: s.seq, value: s.value, step: s.step} : null }"


def metrics(step: int) -> dict:
    return {
        "type": "metrics", "time": time.time(), "step": step, "epoch": step / 40, "images_seen": step * 16,
        "loss": 2.0 / (1 + step / 20), "lr": 0.1, "images_per_sec": 400.0 + step,
        "images_per_sec_per_process": 200.0 + step / 2, "data_wait_share": 0.2,
    }  # fmt: skip


class Trainer(threading.Thread):
    """Appends a run's events as the worker would: batches of metrics, validation, system, progress."""

    def __init__(self, run: Run, *, batches: int, per_batch: int = 6, pause: float = 0.08) -> None:
        super().__init__(daemon=True)
        self.run_id, self.batches, self.per_batch, self.pause = run.pk, batches, per_batch, pause
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            step = 0
            for _ in range(self.batches):
                events = []
                for _ in range(self.per_batch):
                    step += 1
                    events.append(metrics(step))
                    if step % 40 == 0:
                        events.append({"type": "validation", "time": time.time(), "step": step, "epoch": step / 40,
                                       "val_loss": 1.5 / (1 + step / 30), "top1": min(0.95, step / 250),
                                       "top5": 1.0})  # fmt: skip
                events.append({"type": "progress", "time": time.time(), "percent": 100 * step / STEPS,
                               "eta_seconds": (STEPS - step) / 60, "elapsed": step / 60, "step": step})  # fmt: skip
                events.append({"type": "log", "time": time.time(), "line": f"step {step}", "level": "info"})
                if step % 24 == 0:
                    events.append({"type": "system", "time": time.time(), "step": step, "epoch": step / 40,
                                   "images_seen": step * 16, "host_cpu_percent": 50.0, "process_cpu_percent": 90.0,
                                   "gpus": [{"index": 0, "name": "sim", "simulated": True, "cpu_percent": 88.0,
                                             "rss_mb": 300.0}]})  # fmt: skip
                run_events_append(run_id=self.run_id, events=events)
                time.sleep(self.pause)
        except Exception as error:  # surfaced by the test
            self.error = error


def off_the_loop(function, **kwargs):
    """Calls a service from a thread of its own: Playwright's event loop owns this one, and the
    services publish to the channel layer with async_to_sync."""
    worker = threading.Thread(target=function, kwargs=kwargs)
    worker.start()
    worker.join(30)


def points(page, chart: str, trace: int = 0) -> int:
    return page.evaluate(POINTS, {"chart": chart, "trace": trace})


def wait_points(page, chart: str, at_least: int, trace: int = 0, timeout: float = 20) -> int:
    page.wait_for_function(f"({POINTS})({{chart: '{chart}', trace: {trace}}}) >= {at_least}", timeout=timeout * 1000)
    return points(page, chart, trace)


def test_it_grows_the_charts_live_switches_axes_and_shows_done(live_server_url, page, owner):
    dataset = make_dataset_row(owner, status=Dataset.Status.BUILDING)  # unschedulable
    run = run_create(owner=owner, dataset=dataset, name="live", network="lenet", config={"batch_size": 16},
                     device_request={"kind": "cpu"})  # fmt: skip
    host = parked_host()
    off_the_loop(
        run_transition,
        run=run,
        to_state=Run.State.RUNNING,
        from_states=[Run.State.QUEUED],
        reason="go",
        host=host,
        host_boot_id=host.boot_id,
    )
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    page.wait_for_function("document.querySelector('#stream-state').textContent.startsWith('live')")
    assert page.inner_text("#run-state .status") == "running"
    # The history came once, on the socket the page's head opened before the scripts loaded.
    assert page.evaluate("[runPage.stream.adoptedEarlySocket, runPage.stream.replays]") == [True, 1]

    trainer = Trainer(run, batches=STEPS // 6)
    trainer.start()
    first = wait_points(page, "loss", 12)
    later = wait_points(page, "loss", first + 30)
    assert later > first  # the same graph div, extended in place (no reload)
    # Drop the socket mid-stream: the page reconnects with since=<last seq> and catches up.
    page.evaluate("runPage.stream.socket.close()")
    trainer.join(60)
    assert trainer.error is None
    wait_points(page, "loss", STEPS)
    assert points(page, "loss") == STEPS
    # Charts out of view are drawn too, after the first screen (tests/workbench/runs/web/test_live_charts_e2e.py).
    page.locator("[data-chart=throughput]").scroll_into_view_if_needed()
    assert wait_points(page, "throughput", STEPS, trace=4) == STEPS  # data-wait share, on its own axis

    stored = list(run.events.filter(kind="metrics").order_by("seq").values_list("seq", "step", "data"))
    held = page.evaluate(STORE, "loss")
    assert held["seq"] == [seq for seq, _, _ in stored]  # identical: no gap, no duplicate
    assert held["value"] == [data["loss"] for _, _, data in stored]
    assert page.evaluate("runPage.stream.replays") >= 2
    assert points(page, "accuracy") == STEPS // 40
    assert "step 240" in page.inner_text("#run-log")
    assert page.inner_text("#run-best") == "top-1 95.00% at epoch 6"  # the best checkpoint's: first reached there
    assert page.inner_text("#run-epoch") == "6.00"

    # Controls redraw from the held series: x axis, smoothing (raw faint behind), log scale.
    page.select_option("#x-axis", "step")
    assert page.evaluate("document.querySelector('[data-chart=loss]').data[0].x.slice(0, 3)") == [1, 2, 3]
    page.select_option("#x-axis", "images")
    assert page.evaluate("document.querySelector('[data-chart=loss]').data[0].x[9]") == 160
    page.evaluate("e => { e.value = '0'; e.dispatchEvent(new Event('input')); }", page.query_selector("#smoothing"))
    assert (
        points(page, "loss", 1) == 0
        and page.evaluate("document.querySelector('[data-chart=loss]').data[0].opacity") == 1
    )
    page.evaluate("e => { e.value = '0.9'; e.dispatchEvent(new Event('input')); }", page.query_selector("#smoothing"))
    assert points(page, "loss", 1) == STEPS
    assert page.evaluate("document.querySelector('[data-chart=loss]').data[0].opacity") == 0.25
    page.check("#log-loss")
    assert page.evaluate("document.querySelector('[data-chart=loss]').layout.yaxis.type") == "log"

    # The simulated GPU is labelled as such.
    page.locator("[data-chart=gpu]").scroll_into_view_if_needed()
    wait_points(page, "gpu", STEPS // 24)
    assert "simulated GPU" in page.evaluate("document.querySelector('[data-chart=gpu]').data[0].name")

    off_the_loop(run_finish, run=run, to_state=Run.State.DONE, reason="finished 240 steps")
    page.wait_for_function("document.querySelector('#run-state .status').textContent === 'done'")
    page.wait_for_function("document.querySelector('#run-timeline').textContent.includes('done')")
    assert page.is_hidden("#run-abort") and page.is_hidden("#run-pause")


def test_it_watches_a_real_cpu_training_run_to_done(live_server_url, celery_worker, page, owner, make_dataset):
    # Enough work (6 epochs of 60 steps on 32x32 images) that training outlasts several of the
    # launcher's 0.5 s polls even on an idle machine, so the page must receive it in pieces.
    dataset = make_dataset(owner, train=480, val=48, size=32)
    log_in(page, live_server_url, owner.username)
    config = {**TINY_CONFIG, "epochs": 6}
    run = run_submit(owner=owner, dataset=dataset, name="tiny", network="lenet", config=config, gpus="cpu")
    # Paused at once (still queued, or stopped at a checkpoint), so the page is open before it trains.
    off_the_loop(run_pause, run=run)
    wait_for_state(run, Run.State.PAUSED, timeout=60)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    page.wait_for_function("document.querySelector('#stream-state').textContent.startsWith('live')")
    page.wait_for_function("document.querySelector('#run-state .status').textContent === 'paused'")
    # The page records the loss trace's length every 50 ms: it must grow in the same graph div
    # (no reload) while the run trains, then the state reaches done.
    page.evaluate(
        "window.seen = new Set(); setInterval(() => "
        "seen.add(document.querySelector('[data-chart=loss]').data?.[0]?.x.length ?? 0), 50)"
    )
    before = points(page, "loss")
    off_the_loop(run_resume, run=run)
    page.wait_for_function("document.querySelector('#run-state .status').textContent === 'done'", timeout=180_000)
    run.refresh_from_db()
    assert run.state == Run.State.DONE
    stored = run.events.filter(kind="metrics").count()
    wait_points(page, "loss", stored)
    seen = sorted(page.evaluate("[...seen]"))
    assert points(page, "loss") == stored == 360
    assert [count for count in seen if before < count < stored], seen  # it grew live, in steps
    assert points(page, "accuracy") == run.events.filter(kind="validation").count() >= 3
    assert page.inner_text("#run-percent") == "100%"
    assert "%" in page.inner_text("#run-best")


def store_long_run(owner, dataset, *, name: str, batch_size: int, lr: float, steps: int) -> Run:
    config = {"batch_size": batch_size, "solver": {"optimizer": "sgd", "base_lr": lr}}
    run = run_create(owner=owner, dataset=dataset, name=name, network="lenet", config=config,
                     device_request={"kind": "cpu"})  # fmt: skip
    events = [{**metrics(step), "images_seen": step * batch_size, "loss": 3.0 / (1 + step / 500)}
              for step in range(1, steps + 1)]  # fmt: skip
    events[steps // 2]["loss"] = 9.0  # one diverging step
    events += [{"type": "validation", "time": time.time(), "step": step, "epoch": step / 40,
                "val_loss": 2.0 / (1 + step / 500), "top1": min(0.95, step / 8000)}
               for step in range(1000, steps + 1, 1000)]  # fmt: skip
    off_the_loop(run_events_append, run_id=run.pk, events=events)
    return run


def test_it_refines_a_zoom_and_overlays_runs_for_comparison(live_server_url, page, owner):
    dataset = make_dataset_row(owner, status=Dataset.Status.BUILDING)  # unschedulable
    small = store_long_run(owner, dataset, name="small", batch_size=16, lr=0.05, steps=8000)
    large = store_long_run(owner, dataset, name="large", batch_size=64, lr=0.2, steps=3000)
    log_in(page, live_server_url, owner.username)

    page.goto(f"{live_server_url}/runs/{small.pk}/")
    page.select_option("#x-axis", "step")
    page.wait_for_function("document.querySelector('#stream-state').textContent.includes('downsampled')")
    overview = wait_points(page, "loss", 100)
    assert page.inner_text("#run-epoch") == "200.00"  # the header's figures come from the series
    assert overview <= 2000 and page.evaluate("Math.max(...document.querySelector('[data-chart=loss]').data[0].y)") == 9
    # Zoom in: the range comes again from the server at full resolution.
    page.evaluate("Plotly.relayout(document.querySelector('[data-chart=loss]'), {'xaxis.range': [1000, 1100]})")
    page.wait_for_function("document.querySelector('[data-chart=loss]').data?.[0]?.x.length === 103")
    assert page.evaluate("document.querySelector('[data-chart=loss]').data[0].x.slice(0, 2)") == [999, 1000]
    page.evaluate("Plotly.relayout(document.querySelector('[data-chart=loss]'), {'xaxis.autorange': true})")
    page.wait_for_function(f"document.querySelector('[data-chart=loss]').data?.[0]?.x.length === {overview}")

    page.goto(f"{live_server_url}/runs/compare/")
    page.check(f"input[name=runs][value='{small.pk}']")
    page.check(f"input[name=runs][value='{large.pk}']")
    page.select_option("[name=x]", "images")
    # The grid first (the default): a chart per series the runs have, none for what they lack.
    page.click("#compare-form button[type=submit]")
    grid = "document.querySelector('#compare-grid [data-series={}] .compare-chart')"
    # Optional chaining: the wait may start on the page before the submit (no grid: null, not an error).
    page.wait_for_function(f"{grid.format('val_loss')}?.data?.length === 2")
    # Eight validations per run are drawn as measured; the training loss is smoothed (raw + smoothed).
    assert page.evaluate(f"{grid.format('val_loss')}.data.map(t => t.y.length)") == [8, 3]
    assert page.evaluate(f"{grid.format('loss')}.data.length") == 4
    # The grid names the runs once, in its first chart's legend: above the plot, as on the run page
    # (below it, three runs' names lay over the x axis's title).
    legend = f"(() => {{ const box = (s) => {grid.format('loss')}.querySelector(s).getBoundingClientRect();"
    assert page.evaluate(f"{legend} return box('.legend').bottom <= box('.nsewdrag').top + 1; }})()")
    shown = "[...document.querySelectorAll('#compare-grid .chart-card:not([hidden])')].map(c => c.dataset.series)"
    assert page.evaluate(shown) == ["loss", "val_loss", "top1", "lr", "images_per_sec", "data_wait_share"]
    columns = "getComputedStyle(document.getElementById('compare-grid')).gridTemplateColumns.split(' ').length"
    assert page.evaluate(columns) >= 2
    page.select_option("[name=name]", "loss")
    page.click("#compare-form button[type=submit]")
    page.wait_for_function("document.querySelector('#compare-chart')?.data?.length === 4")  # raw + smoothed each
    names = page.evaluate("document.querySelector('#compare-chart').data.filter(t => t.showlegend).map(t => t.name)")
    assert names == [f"small (#{small.pk}: lenet, batch 16, lr 0.05)", f"large (#{large.pk}: lenet, batch 64, lr 0.2)"]
    # Images seen put both on one scale: 8,000 steps of 16 and 3,000 steps of 64.
    ends = page.evaluate("document.querySelector('#compare-chart').data.map(t => t.x[t.x.length - 1])")
    assert ends == [128_000, 128_000, 192_000, 192_000]


def test_it_shows_why_a_run_waits_and_aborts_it_from_the_page(live_server_url, page, owner):
    dataset = make_dataset_row(owner)
    run = run_create(owner=owner, dataset=dataset, name="queued", network="lenet", config={},
                     device_request={"kind": "count", "count": 4})  # fmt: skip
    Run.objects.filter(pk=run.pk).update(state=Run.State.WAITING, wait_reason="needs 4 GPUs on one host, 0 free")
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    # The scheduler (when a worker is up in this session) rewrites the reason in its own words:
    # 4 GPUs on one host, or no worker online at all when the session's worker beat late.
    assert page.inner_text("#run-wait").startswith(("needs 4 GPUs", "no worker online"))
    assert page.is_visible("#run-pause") and page.is_hidden("#run-resume")
    # Abort asks first, naming the run; dismissed, nothing is sent.
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("#run-abort")
    assert asked and asked[0].startswith('Abort "queued"? It stops for good'), asked
    assert page.is_visible("#run-abort")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#run-abort")
    # The API call changes the state; the status event comes back over the socket.
    page.wait_for_function("document.querySelector('#run-state .status').textContent === 'aborted'")
    page.wait_for_function("document.querySelector('#run-timeline').textContent.includes('aborted by the user')")
    assert page.is_hidden("#run-abort") and page.is_hidden("#run-action-error")
    assert "aborted by the user" in page.inner_text("#run-log")
    assert Run.objects.get(pk=run.pk).state == Run.State.ABORTED


def test_it_fills_a_gap_in_the_live_stream_with_a_replay(live_server_url, page, owner):
    from unittest import mock

    dataset = make_dataset_row(owner, status=Dataset.Status.BUILDING)  # unschedulable
    run = run_create(owner=owner, dataset=dataset, name="gappy", network="lenet", config={},
                     device_request={"kind": "cpu"})  # fmt: skip
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    page.wait_for_function("document.querySelector('#stream-state').textContent.startsWith('live')")
    off_the_loop(run_events_append, run_id=run.pk, events=[metrics(step) for step in range(1, 11)])
    wait_points(page, "loss", 10)
    # Stored but never delivered (as when the channel layer drops for a slow client)...
    with mock.patch("workbench.runs.lifecycle.publish_run_events"):
        off_the_loop(run_events_append, run_id=run.pk, events=[metrics(step) for step in range(11, 21)])
    # ...then the next live batch shows the gap: the page asks for a replay and fills it in.
    off_the_loop(run_events_append, run_id=run.pk, events=[metrics(step) for step in range(21, 26)])
    wait_points(page, "loss", 25)
    held = page.evaluate(STORE, "loss")
    assert held["step"] == list(range(1, 26))
    assert held["seq"] == list(run.events.filter(kind="metrics").order_by("seq").values_list("seq", flat=True))
    assert page.evaluate("runPage.stream.gaps") == 1 and page.evaluate("runPage.stream.replays") == 2


def test_it_compacts_a_long_live_series_and_redraws_it_once(live_server_url, page, owner):
    dataset = make_dataset_row(owner, status=Dataset.Status.BUILDING)  # unschedulable
    run = run_create(owner=owner, dataset=dataset, name="long", network="lenet", config={},
                     device_request={"kind": "cpu"})  # fmt: skip
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    page.select_option("#x-axis", "step")
    page.wait_for_function("document.querySelector('#stream-state').textContent.startsWith('live')")
    # 25,000 live points in the page itself (a long run watched for hours), with one spike.
    page.evaluate("""() => {
      const events = [];
      for (let step = 1; step <= 25000; step++) {
        events.push({seq: step + 1, type: "metrics", time: 1e9 + step, step, epoch: step / 1000,
                     loss: step === 17777 ? 50 : 1 / step});
      }
      runPage.stream.applyLive(events);
    }""")
    page.wait_for_function("document.querySelector('[data-chart=loss]').data?.[0]?.x.length > 0")
    held = page.evaluate("runPage.store.get('loss').value.length")
    drawn = points(page, "loss")
    # Compacted at 20,000 to 4,000 min/max points, then grown by the rest: bounded, spike kept.
    assert held == drawn and held < 10_000
    assert page.evaluate("Math.max(...document.querySelector('[data-chart=loss]').data[0].y)") == 50
    assert page.evaluate("runPage.stream.lastSeq") == 25_001
