"""One formatter for the numbers people read: the server's filters (workbench/runs/templatetags/
numbers.py) and the browser's module (static/workbench/format.js) write every value alike."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from datasets.models import Dataset
from tests.conftest import REPO_ROOT
from tests.support.factories import make_dataset_row
from trainer import protocol
from workbench.inference.services import checkpoint_choices
from workbench.runs.services import run_create
from workbench.runs.templatetags import numbers

FORMAT_JS = REPO_ROOT / "static" / "workbench" / "format.js"
FRACTIONS = [0.9775, 0.99994, 1.0, 0.0, 0.12345, None]
LOSSES = [0.123456, 2.5, 0.0, 0.000123, 1234.5, None]
SIZES = [0, 512, 1536, 5 * 2**20, 3.25 * 2**30, 2**41, None]
DURATIONS = [0, 2.5, 59.4, 61, 3599, 3600, 7384, None]
WHOLES = [0, 999.5, 1234.4, 1234567, None]
RATES = [0, 0.3, 0.04567, 2.125, 12.34, 99.96, 1234.5, None]
COUNTS = [0, 999, 61_706, 1_234_567, 11_689_512, None]
SETTINGS = [0.00012345678901234567, 1.2345678e-7, 0.1, 64, 2.0, 12345, 0.33333333333333331, "sgd", True]
MOMENT = datetime(2026, 12, 2, 14, 3, 9, tzinfo=UTC)


def browser_formats() -> dict:
    # Playwright's own Node runs the module as the browser would (an ES module, no build step).
    import playwright

    node = Path(playwright.__file__).parent / "driver" / "node"
    script = (
        f"import * as f from {json.dumps(FORMAT_JS.as_uri())};"
        "const values = JSON.parse(process.argv[1]);"
        "console.log(JSON.stringify({"
        "percent: values.fractions.map(f.formatPercent), loss: values.losses.map(f.formatLoss),"
        "metric: [f.formatMetric('top1', 0.9775), f.formatMetric('val_loss', 0.9775)],"
        "bytes: values.sizes.map(f.formatBytes), duration: values.durations.map(f.formatDuration),"
        "date: f.formatDate(values.moment),"
        "whole: values.wholes.map(f.formatWhole), count: values.counts.map(f.formatCount),"
        "rate: values.rates.map(f.formatRate),"
        "setting: values.settings.map(f.formatSetting),"
        "metrics: values.metrics.map((name) => [f.metricName(name), f.isFraction(name), f.higherIsBetter(name)])}));"
    )
    values = {"fractions": FRACTIONS, "losses": LOSSES, "sizes": SIZES, "durations": DURATIONS, "wholes": WHOLES,
              "counts": COUNTS, "settings": SETTINGS, "rates": RATES}  # fmt: skip
    values["moment"] = MOMENT.isoformat()
    values["metrics"] = sorted(protocol.METRIC_DIRECTION)
    out = subprocess.run(
        [str(node), "--input-type=module", "-e", script, json.dumps(values)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "TZ": "UTC"},  # the server's TIME_ZONE
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_it_writes_every_number_alike_on_the_server_and_in_the_browser():
    browser = browser_formats()
    server = {
        "percent": [numbers.percent(v) for v in FRACTIONS],
        "loss": [numbers.loss(v) for v in LOSSES],
        "metric": [numbers.metric(0.9775, "top1"), numbers.metric(0.9775, "val_loss")],
        "bytes": [numbers.bytes_size(v) for v in SIZES],
        "duration": [numbers.duration(v) for v in DURATIONS],
        "date": numbers.datetime_text(MOMENT),
        "whole": [numbers.whole(v) for v in WHOLES],
        "count": [numbers.count(v) for v in COUNTS],
        "rate": [numbers.rate(v) for v in RATES],
        "setting": [numbers.setting(v) for v in SETTINGS],
        # Every metric a task validates: named, shown and ranked alike (the trainer's direction).
        "metrics": [
            [numbers.metric_name(name), name in numbers.FRACTIONS, direction == "max"]
            for name, direction in sorted(protocol.METRIC_DIRECTION.items())
        ],
    }
    assert server == browser
    del server["metrics"]
    assert server == {
        "percent": ["97.75%", "99.99%", "100.00%", "0.00%", "12.35%", "–"],
        "loss": ["0.1235", "2.5000", "0.0000", "1.23e-4", "1234.5000", "–"],
        "metric": ["97.75%", "0.9775"],
        "bytes": ["0 B", "512 B", "1.5 KiB", "5.0 MiB", "3.3 GiB", "2.0 TiB", "–"],
        "duration": ["0 s", "3 s", "59 s", "1 min 1 s", "59 min 59 s", "1 h 0 min", "2 h 3 min", "–"],
        "date": "2026-12-02 14:03:09",
        "whole": ["0", "1,000", "1,234", "1,234,567", "–"],
        "count": ["0", "999", "61.7 k", "1.23 M", "11.7 M", "–"],
        # images/s: a CPU run's 0.3 is not "0" (issue 33)
        "rate": ["0", "0.3", "0.0457", "2.13", "12.3", "100", "1,235", "–"],
        "setting": ["0.0001235", "1.235e-7", "0.1", "64", "2", "12345", "0.3333", "sgd", "true"],
    }


@pytest.mark.django_db
def test_it_writes_a_checkpoints_metrics_as_the_run_page_does(owner):
    # The checkpoint menus said "top1 0.9775" where the run header says 97.75%.
    dataset = make_dataset_row(owner, status=Dataset.Status.BUILDING)  # never started
    run = run_create(owner=owner, dataset=dataset, name="r", network="lenet", config={}, device_request={"kind": "cpu"})
    folder = protocol.checkpoint_dir(run.run_dir)
    folder.mkdir(parents=True)
    for name in (protocol.snapshot_name(80), protocol.BEST):
        (folder / name).write_bytes(b"")
    metrics = {"step": 80, "top1": 0.9775, "val_loss": 0.081234}
    index = {
        "snapshots": {protocol.snapshot_name(80): metrics},
        "best": {"file": protocol.snapshot_name(80), **metrics},
    }
    (folder / protocol.INDEX).write_text(json.dumps(index))
    try:
        labels = [choice["label"] for choice in checkpoint_choices(run=run)]
    finally:
        shutil.rmtree(run.run_dir)  # the run's pk may come again in another test
    assert labels == [
        "best: step 80 (top-1 97.75%, val. loss 0.0812)",
        "last: step 80 (top-1 97.75%, val. loss 0.0812)",
        "step 80 (top-1 97.75%, val. loss 0.0812)",
    ]


# The pages that wrote their own numbers (issue 21, item 14): percentages by widthratio and "%",
# losses by floatformat:4, dates by |date and the browser's locale, sizes in MiB by hand.
OWN_FORMATS = {
    "template": re.compile(r"floatformat:4|\|date:|widthratio [^%]*%\}\s?%"),
    "script": re.compile(r"toLocale\w*String\(|100 \* [\w.]+\)\.toFixed|Math\.round\(100 \*|[`\"}] ?[KMGT]i?B\b"),
}
FORMATTED_PAGES = [
    "templates/runs/run_list.html", "templates/workbench/home.html", "templates/runs/queue.html",
    "templates/benchmarks/list.html", "templates/benchmarks/detail.html", "templates/benchmarks/compare.html",
    "templates/runs/new_run.html", "static/runs/run_list.js", "static/workbench/home.js",
    "static/benchmarks/detail.js", "static/runs/new_run.js", "static/runs/largest_batch.js",
    "static/runs/run_detail.js",
    "templates/searches/search_list.html", "templates/searches/search_detail.html", "static/searches/search_detail.js",
]  # fmt: skip


def test_it_writes_the_lists_home_queue_benchmarks_and_new_run_numbers_through_the_formatter():
    found = []
    for name in FORMATTED_PAGES:
        rule = OWN_FORMATS["template" if name.endswith(".html") else "script"]
        for number, line in enumerate((REPO_ROOT / name).read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{name}:{number}: {match.group(0)}" for match in rule.finditer(line)]
    assert found == []
