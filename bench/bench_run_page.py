"""Opening the live page of a run with a 1,000,000-point series, in Chromium against a real daphne.

The run holds N metrics events (loss, lr, throughput, data wait) and a validation event every 1,000
steps. Time = from navigation start to the loss chart drawn with its points (Plotly's graph div
holds them), measured by the browser. Cold: the first open after daphne started (the series is
read from the database into the process's columns, which leaves a snapshot in the run folder);
warm: the next open (columns cached, only new rows read); restarted: a new daphne process, which
starts from the snapshot. The page gets the history as a downsampled replay over its websocket.

Baseline: what a page that draws every point pays at the least, in the same browser: one
`Plotly.newPlot` of a 1,000,000-point WebGL trace from arrays already in memory (no transfer, no
JSON parsing: a lower bound for sending whole series).

    .venv/bin/python bench/bench_run_page.py [--events 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DRAWN = "document.querySelector('[data-chart=loss]').data?.[0]?.x.length > 0"
MARKS = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const marks = Object.fromEntries(performance.getEntriesByType("mark").map((m) => [m.name, Math.round(m.startTime)]));
  return {response_end: Math.round(nav.responseEnd), dom_ready: Math.round(nav.domContentLoadedEventEnd), ...marks};
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


def open_page(browser, origin: str, cookie: str, url: str, context=None) -> float:
    """One open in a fresh browser context (nothing cached), or in `context` (its HTTP cache)."""
    own = context is None
    if own:
        context = browser.new_context()
        context.add_cookies([{"name": "sessionid", "value": cookie, "url": origin}])
    page = context.new_page()
    page.goto(url)
    page.wait_for_function(DRAWN, timeout=120_000, polling="raf")
    elapsed = page.evaluate("performance.now()")
    marks = page.evaluate(MARKS)
    print(f"  opened in {elapsed:.0f} ms: {marks}", file=sys.stderr)
    if own:
        context.close()
    else:
        page.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
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
    from playwright.sync_api import sync_playwright

    from datasets.models import Dataset
    from tests.conftest import CHROMIUM, CHROMIUM_ARGS
    from workbench.embedded_redis import free_port
    from workbench.runs.services import run_create
    from workbench.supervisor import die_with_parent

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

    def start_daphne():
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "--bind", "127.0.0.1", "--port", str(port), "workbench.asgi:application"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, preexec_fn=die_with_parent,
        )  # fmt: skip
        origin = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{origin}/healthz", timeout=1).close()
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(0.1)
        return process, origin

    daphne, origin = start_daphne()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            url = f"{origin}/runs/{run.pk}/"
            cold = open_page(browser, origin, cookie, url)
            warm = min(open_page(browser, origin, cookie, url) for _ in range(3))
            context = browser.new_context()
            context.add_cookies([{"name": "sessionid", "value": cookie, "url": origin}])
            cached = min(open_page(browser, origin, cookie, url, context) for _ in range(3))
            page = context.new_page()
            page.goto(url)
            page.wait_for_function(DRAWN, timeout=120_000)
            naive = page.evaluate(NAIVE, args.events)
            points = page.evaluate("document.querySelector('[data-chart=loss]').data[0].x.length")
            context.close()
            # A new daphne process: no columns in memory, the snapshot the first read left on disk.
            daphne.terminate()
            daphne.wait(timeout=10)
            daphne, origin = start_daphne()
            restarted = open_page(browser, origin, cookie, f"{origin}/runs/{run.pk}/")
            browser.close()
    finally:
        daphne.terminate()
        daphne.wait(timeout=10)

    print(f"\nRun page with a {args.events:,}-point loss series (Chromium, daphne, SQLite)\n")
    print("| case | time to chart drawn | points drawn | vs warm |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| ours, cold (first open after daphne started) | {cold:,.0f} ms | {points:,} | {cold / warm:.1f}x |")
    print(f"| ours, warm server, empty browser cache | {warm:,.0f} ms | {points:,} | 1.0x |")
    print(f"| ours, warm server, browser has plotly.js cached | {cached:,.0f} ms | {points:,} | {cached / warm:.1f}x |")
    print(f"| ours, restarted daphne (columns from the run's snapshot) | {restarted:,.0f} ms | {points:,} | "
          f"{restarted / warm:.1f}x |")  # fmt: skip
    print(f"| naive lower bound: Plotly draws all points | {naive:,.0f} ms | {args.events:,} | {naive / warm:.1f}x |")


if __name__ == "__main__":
    main()
