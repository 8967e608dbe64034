"""A benchmark end to end on the suite's real worker (2 simulated GPUs): a 2 x 2 LeNet grid is
queued, measured by `python -m trainer benchmark`, and its page in Chromium fills the table and
draws the charts live; the CSV download carries the same numbers."""

from __future__ import annotations

import csv
import io

import pytest

from tests.conftest import log_in
from tests.support.waiting import wait_for_state
from workbench.benchmarks.models import Benchmark
from workbench.benchmarks.selectors import benchmark_payload
from workbench.benchmarks.services import benchmark_submit

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

GRID = {"networks": ["lenet"], "image_size": 28, "gpus": "1,2", "batch_sizes": "8,16", "steps": 3, "warmup_steps": 1}


def test_it_fills_the_table_and_charts_of_a_two_by_two_grid_live(live_server_url, celery_worker, page, owner, client):
    log_in(page, live_server_url, owner.username)
    benchmark = benchmark_submit(owner=owner, request=GRID)
    page.goto(f"{live_server_url}/benchmarks/{benchmark.pk}/")
    page.wait_for_function("document.querySelectorAll('td[data-status=ok]').length === 4", timeout=240_000)
    wait_for_state(benchmark, Benchmark.State.DONE, Benchmark.State.FAILED, timeout=120)
    assert benchmark.state == Benchmark.State.DONE, benchmark.reason
    assert page.locator("#bench-state").text_content() == "done"
    assert page.locator("table th").all_text_contents()[:3] == ["batch / GPU", "1 GPU", "2 GPUs"]
    for chart, x_title, x_ticks in (
        ("chart-scaling", "GPUs", ["1", "2"]),
        ("chart-speedup", "GPUs", ["1", "2"]),
        ("chart-batch", "batch size per GPU", ["8", "16"]),
    ):
        assert page.locator(f"#{chart} .main-svg").count() > 0
        assert page.locator(f"#{chart} .xtitle").text_content() == x_title
        assert page.locator(f"#{chart} .xtick text").all_text_contents() == x_ticks  # measured values only
        assert page.locator(f"#{chart} .ytitle").text_content() in ("images/s", "speed-up")
    cells = benchmark_payload(benchmark)["cells"]
    assert len(cells) == 4 and all(c["images_per_sec"] > 0 for c in cells)
    for cell in cells:
        one = next(c for c in cells if c["gpus"] == 1 and c["batch_size"] == cell["batch_size"])
        assert cell["speedup"] == pytest.approx(cell["images_per_sec"] / one["images_per_sec"])
        assert cell["efficiency"] == pytest.approx(cell["speedup"] / cell["gpus"])
        shown = page.locator(f"td[data-gpus='{cell['gpus']}'][data-batch='{cell['batch_size']}']").text_content()
        assert shown.startswith(f"{round(cell['images_per_sec']):,}")
    client.force_login(owner)
    rows = list(csv.DictReader(io.StringIO(client.get(f"/benchmarks/{benchmark.pk}/benchmark.csv").content.decode())))
    by_key = {(c["gpus"], c["batch_size"]): c for c in cells}
    assert len(rows) == 4
    for row in rows:
        cell = by_key[(int(row["gpus"]), int(row["batch_size"]))]
        assert float(row["images_per_sec"]) == pytest.approx(cell["images_per_sec"])
        assert float(row["speedup"]) == pytest.approx(cell["speedup"])
    markdown = client.get(f"/benchmarks/{benchmark.pk}/benchmark.md").content.decode()
    assert "| batch / GPU | 1 GPU | 2 GPUs |" in markdown
    other = client.get(f"/benchmarks/{benchmark.pk}/compare/{benchmark.pk}/").content.decode()
    assert other.count("1.00x") == 4
