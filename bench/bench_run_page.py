"""Opening the live page of a run with a 1,000,000-point series, in Chromium against a real daphne.

The run holds N metrics events (loss, lr, throughput, data wait) and a validation event every 1,000
steps. Time = from navigation start to the loss chart's first drawing done, as the page marks it
(and to every chart of the first screen drawn). The page gets the history as a downsampled replay
over its websocket. Cases, in this order:
- no snapshot: a new daphne reads all N events from the database (runs whose events the launcher
  did not write; this read leaves a snapshot);
- after a restart: a new daphne, the run's series snapshot on disk (what the worker leaves when a
  run ends, and every 50,000 events while it trains), then only newer rows;
- warm server, first visit: the next opens (the process keeps the columns), each in a new private
  browser context (nothing cached); the median of --opens;
- warm server, returning visitor: a browser profile on disk that opened the page once before, so
  its HTTP cache and V8's code cache hold plotly.js; the median of --opens.

Baseline: what a page that draws every point pays at the least, in the same browser: one
`Plotly.newPlot` of a 1,000,000-point WebGL trace from arrays already in memory (no transfer, no
JSON parsing: a lower bound for sending whole series).

    .venv/bin/python bench/bench_run_page.py [--events 1000000] [--opens 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DRAWN = "document.querySelector('[data-chart=loss]').data?.[0]?.x.length > 0"
# The loss chart drawn with its points, and every chart of the first screen (its top above the
# fold) drawn with its points (static/runs/charts.js marks each chart's first such drawing).
IN_VIEW_DRAWN = """() => performance.getEntriesByName('drawn:loss').length > 0
  && [...document.querySelectorAll('[data-chart]')]
  .filter((el) => el.getBoundingClientRect().top < window.innerHeight)
  .every((el) => performance.getEntriesByName(`drawn:${el.dataset.chart}`).length > 0)"""
# The page marks when each chart's first drawing is done (static/runs/charts.js): the time that
# counts is the browser's, not when this process next gets an answer from it.
MARKS = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const marks = Object.fromEntries(performance.getEntriesByType("mark").map((m) => [m.name, Math.round(m.startTime)]));
  const inView = [...document.querySelectorAll('[data-chart]')]
    .filter((el) => el.getBoundingClientRect().top < window.innerHeight).map((el) => el.dataset.chart);
  return {response_end: Math.round(nav.responseEnd), dom_ready: Math.round(nav.domContentLoadedEventEnd), ...marks,
          in_view: inView};
}"""
NAIVE = """async (count) => {
  const x = new Float64Array(count), y = new Float64Array(count);
  for (let i = 0; i < count; i++) { x[i] = i; y[i] = 2 * Math.exp(-i / (count / 4)) + Math.random() * 0.05; }
  const div = document.createElement("div");
  div.style.height = "300px";
  document.body.prepend(div);
  const started = performance.now();
  await Plotly.newPlot(div, [{type: "scattergl", mode: "lines", x, y}], {margin: {t: 10}});
  await new Promise((resolve) => requestAnimationFrame(() => resolve()));
  return performance.now() - started;
}"""


def insert_events(run_id: int, count: int) -> None:
    from django.db import connection, transaction

    from workbench.runs.models import Run, RunEvent

    table = RunEvent._meta.db_table
    rows, seq = [], 1  # seq 1 is the run's "queued" status
    for step in range(1, count + 1):
        seq += 1
        data = {"images_seen": step * 64, "loss": 2.0 / (1 + step / 5000), "lr": 0.1, "images_per_sec": 900.0,
                "images_per_sec_per_process": 450.0, "data_wait_share": 0.05}  # fmt: skip
        rows.append((run_id, seq, "metrics", step, step / 1000, 1.7e9 + step / 20, json.dumps(data)))
        if step % 1000 == 0:
            seq += 1
            data = {"val_loss": 1.0 / (1 + step / 5000), "top1": min(0.99, step / count), "top5": 1.0}
            rows.append((run_id, seq, "validation", step, step / 1000, 1.7e9 + step / 20, json.dumps(data)))
    sql = f"INSERT INTO {table} (run_id, seq, kind, step, epoch, time, data) VALUES (%s, %s, %s, %s, %s, %s, %s)"
    with transaction.atomic(), connection.cursor() as cursor:
        for first in range(0, len(rows), 50_000):
            cursor.executemany(sql, rows[first : first + 50_000])
    Run.objects.filter(pk=run_id).update(last_seq=seq, state="done", progress=1.0)


def open_page(browser, origin: str, cookie: str, url: str, context=None) -> tuple[int, int]:
    """One open in a fresh browser context (nothing cached), or in `context` (what it has cached).
    Returns when the loss chart and when the whole first screen were drawn, in ms."""
    own = context is None
    if own:
        context = browser.new_context()
        context.add_cookies([{"name": "sessionid", "value": cookie, "url": origin}])
    page = context.new_page()
    page.goto(url)
    page.wait_for_function(IN_VIEW_DRAWN, timeout=120_000)
    marks = page.evaluate(MARKS)
    elapsed = marks["drawn:loss"], max(marks[f"drawn:{name}"] for name in marks["in_view"])
    print(f"  loss chart drawn at {elapsed[0]} ms, first screen at {elapsed[1]} ms: {marks}", file=sys.stderr)
    if own:
        context.close()
    else:
        page.close()
    return elapsed


def median_open(opens: list[tuple[int, int]]) -> tuple[int, int]:
    return statistics.median_low(opens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--opens", type=int, default=5, help="opens per warm case")
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix="bench-page-")
    from tests.services import start_test_redis

    os.environ.update(REDIS_URL=start_test_redis(Path(data_dir)), DJANGO_SETTINGS_MODULE="workbench.settings",
                      WORKBENCH_DATA_DIR=data_dir)  # fmt: skip
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from live_server import start_daphne
    from playwright.sync_api import sync_playwright

    from datasets.models import Dataset
    from tests.conftest import CHROMIUM, CHROMIUM_ARGS
    from workbench.runs.services import run_create

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("viewer")
    dataset = Dataset.objects.create(owner=owner, name="bench", status=Dataset.Status.READY)
    run = run_create(owner=owner, dataset=dataset, name="long", network="resnet18",
                     config={"batch_size": 64}, device_request={"kind": "cpu"})  # fmt: skip
    started = time.perf_counter()
    insert_events(run.pk, args.events)
    print(f"stored {args.events:,} metrics events in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    client = Client()
    client.force_login(owner)
    cookie = client.cookies["sessionid"].value

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    daphne, origin = start_daphne(env)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            unsnapshotted = open_page(browser, origin, cookie, f"{origin}/runs/{run.pk}/")
            daphne.terminate()
            daphne.wait(timeout=10)
            daphne, origin = start_daphne(env)
            url = f"{origin}/runs/{run.pk}/"
            restarted = open_page(browser, origin, cookie, url)
            first_visits = [open_page(browser, origin, cookie, url) for _ in range(args.opens)]
            # A returning visitor: a browser profile on disk that has opened the page before, so
            # its HTTP cache and V8's code cache hold plotly.js (a private context keeps neither).
            profile = playwright.chromium.launch_persistent_context(
                tempfile.mkdtemp(prefix="bench-profile-"), executable_path=CHROMIUM, args=CHROMIUM_ARGS
            )
            profile.add_cookies([{"name": "sessionid", "value": cookie, "url": origin}])
            open_page(browser, origin, cookie, url, profile)
            returning = [open_page(browser, origin, cookie, url, profile) for _ in range(args.opens)]
            page = profile.new_page()
            page.goto(url)
            page.wait_for_function(DRAWN, timeout=120_000)
            naive = page.evaluate(NAIVE, args.events)
            points = page.evaluate("document.querySelector('[data-chart=loss]').data[0].x.length")
            profile.close()
            browser.close()
    finally:
        daphne.terminate()
        daphne.wait(timeout=10)

    print(f"\nRun page with a {args.events:,}-point loss series (Chromium, daphne, SQLite), "
          f"load average {os.getloadavg()[0]:.2f}\n")  # fmt: skip
    warm = median_open(first_visits)
    print("| case | loss chart drawn | first screen drawn | points drawn | loss chart vs first visit |")
    print("| --- | ---: | ---: | ---: | ---: |")
    rows = [
        ("ours, first open of a new daphne, no snapshot (reads every row)", unsnapshotted),
        ("ours, first open of a new daphne, with the run's snapshot", restarted),
        (f"ours, warm server, first visit (new private context; median of {args.opens})", warm),
        (f"ours, warm server, returning visitor (browser profile; median of {args.opens})", median_open(returning)),
    ]
    for name, (loss, screen) in rows:
        print(f"| {name} | {loss:,} ms | {screen:,} ms | {points:,} | {loss / warm[0]:.2f}x |")
    print(f"| naive lower bound: Plotly draws all points | {naive:,.0f} ms | | {args.events:,} | "
          f"{naive / warm[0]:.2f}x |")  # fmt: skip
    for name, opens in (("first visits", first_visits), ("returning visits", returning)):
        print(f"{name}, loss chart drawn: " + ", ".join(f"{loss:,} ms" for loss, _ in opens))


if __name__ == "__main__":
    main()
