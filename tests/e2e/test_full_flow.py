"""The whole point-and-click flow in a real Chromium against daphne and the real worker, from
Home at 1280x800: a new dataset from an archive, a new run (two epochs on the CPU) through the
wizard with its live previews, watch it finish, classify an image, open the confusion matrix,
look inside, and download the ONNX export (then run it with onnxruntime). Then every page again
at 1920x1080. No page scrolls sideways at either size, and a run's first charts are on the first
screen. With E2E_SCREENSHOTS=<folder> it keeps a screenshot of each page at each size."""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image

from tests.conftest import log_in
from tests.workbench.inference.conftest import digits_zip

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SMALL, LARGE = {"width": 1280, "height": 800}, {"width": 1920, "height": 1080}
# What scrolls sideways: the page itself, a card, or a table's own scroller.
SIDEWAYS = """() => [document.documentElement, ...document.querySelectorAll('.card, .table-scroll')]
  .filter((el) => el.scrollWidth > el.clientWidth + 1)
  .map((el) => `${el.id || el.className || el.tagName}: ${el.scrollWidth} > ${el.clientWidth}`)"""
# The first row of charts: where it ends, and how wide the charts are drawn against their cards.
FIRST_CHARTS = """() => [...document.querySelectorAll('.chart-card:not([hidden])')].slice(0, 2).map((card) => ({
  bottom: card.getBoundingClientRect().bottom, card: card.clientWidth,
  drawn: Number(card.querySelector('.main-svg')?.getAttribute('width') || 0)}))"""


def assert_fits(page, name: str) -> None:
    """No sideways scroll on this page at this size (and a screenshot of it, when asked for)."""
    page.wait_for_load_state()
    size = page.viewport_size
    if os.environ.get("E2E_SCREENSHOTS"):
        folder = Path(os.environ["E2E_SCREENSHOTS"])
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=folder / f"{name}-{size['width']}.png")
    assert page.evaluate(SIDEWAYS) == [], f"{name} scrolls sideways at {size['width']}x{size['height']}"


def assert_charts_first(page) -> None:
    """The first row of charts is whole on the first screen and drawn as wide as its cards."""
    page.wait_for_function("document.querySelectorAll('.chart-card:not([hidden]) .main-svg').length >= 2")
    page.wait_for_function(f"({FIRST_CHARTS})().every((chart) => chart.drawn >= chart.card - 60)")
    charts = page.evaluate(FIRST_CHARTS)
    assert page.evaluate("window.scrollY") == 0
    assert all(chart["bottom"] <= page.viewport_size["height"] for chart in charts), charts


def test_the_whole_flow_from_archive_to_onnx(live_server_url, celery_worker, page, owner, tmp_path):
    archive, digit = digits_zip(tmp_path / "digits.zip", classes=3, per_class=30)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_viewport_size(SMALL)
    log_in(page, live_server_url, owner.username)

    # 1. From Home (empty: it says what comes first), a dataset from the archive, through the wizard.
    assert_fits(page, "home-empty")
    assert "No datasets yet" in page.inner_text("#home-datasets")
    page.click("#home-new-dataset")
    page.wait_for_url(re.compile(r"/datasets/new/$"))
    page.set_input_files("#archive-file", str(archive))
    page.wait_for_selector("text=Uploaded digits.zip")
    page.click("#wizard-next")
    page.fill("[name=image_width]", "8")
    page.fill("[name=image_height]", "8")
    page.select_option("[name=channels]", "1")
    page.click("#wizard-next")
    page.wait_for_selector("#preview-resized[src^='data:image/png']")
    page.click("#wizard-next")
    page.click("#create-dataset")
    page.wait_for_url(re.compile(r"/datasets/\d+/$"))
    dataset_url = page.url
    page.wait_for_selector("#class-table", timeout=60_000)
    assert_fits(page, "dataset")

    # 2. Home links the dataset; a new run from there, with the live previews. A second tab keeps
    # Home open: it shows the run when it appears and its state as it changes, without a reload.
    page.goto(f"{live_server_url}/")
    assert page.get_attribute("#home-datasets a.long-name", "href") == dataset_url.removeprefix(live_server_url)
    home = page.context.new_page()
    home.set_viewport_size(SMALL)
    home.goto(f"{live_server_url}/")
    home.wait_for_function("document.querySelector('#home-runs .empty')")
    page.click("#home-new-run")
    page.wait_for_selector("#lr-chart .main-svg")
    assert "8×8, gray, 3 classes" in page.inner_text("#dataset-facts")
    # The first sizing of the networks loads torch in the web process: slow on a busy machine.
    unfit = "tr[data-network=alexnet] .network-fit:has-text('needs images of at least')"
    page.wait_for_selector(unfit, timeout=120_000)
    page.wait_for_selector("text=Simulated GPU 1")  # the live devices table (polls /api/gpus/)
    # Every fit answered (the zoo's come in chunks and move the rows): a click then lands.
    page.wait_for_selector("#network-table[data-fits=done]", state="attached", timeout=120_000)
    # The custom network editor shows the shape after each layer.
    page.check("#network-custom")
    page.wait_for_function("document.querySelector('#layer-table tbody tr:last-child .shape').textContent === '3'")
    assert page.inner_text("#layer-table tbody tr:first-child .shape") == "16 × 8 × 8"
    page.fill("#layer-table tbody tr:nth-child(3) input[data-param=kernel_size]", "16")
    page.wait_for_selector("#layer-error:has-text('layer 2 (max_pool)')")
    page.check("#network-lenet")
    # The learning-rate chart follows the edits.
    page.select_option("[name=optimizer]", "adam")
    page.fill("[name=base_lr]", "0.003")
    page.wait_for_function("document.getElementById('lr-chart').data?.[0]?.y[0] === 0.003")
    page.fill("[name=base_lr]", "-1")
    page.wait_for_selector("#errors-base_lr:has-text('must be between 0 and 10')")
    page.fill("[name=base_lr]", "0.003")
    page.fill("[name=epochs]", "2")
    page.fill("[name=batch_size]", "8")
    page.fill("[name=num_workers]", "0")
    page.select_option("[name=lr_policy]", "fixed")
    page.wait_for_function("document.getElementById('lr-summary').textContent.includes('per epoch')")
    page.check("input[name=device_mode][value=specific]")
    page.wait_for_selector("#placement:has-text('Tick at least one GPU')")
    # The network split over the two simulated GPUs (model parallel), then a split they cannot form.
    page.check("input[name=device_mode][value=count]")
    # A number's box is a number's width, not the card's (it was 1,100 px at 1280).
    assert page.evaluate("document.querySelector('[name=gpu_count]').getBoundingClientRect().width") <= 14 * 16
    page.fill("[name=gpu_count]", "2")
    page.fill("[name=model_parallel]", "2")
    page.wait_for_selector("#placement:has-text('split over 2 GPUs per copy; 1 copy trains in data parallel')")
    page.fill("[name=model_parallel]", "3")
    page.wait_for_selector("#errors-model_parallel:has-text('2 GPU(s) cannot form groups of 3')")
    page.fill("[name=model_parallel]", "2")
    page.check("input[name=device_mode][value=cpu]")  # one copy on the CPU: the field goes, back to 1
    assert page.locator("[name=model_parallel]").is_hidden()
    assert page.input_value("[name=model_parallel]") == "1"
    page.wait_for_selector("#placement:has-text('Starts now on')")
    page.fill("[name=name]", "digits e2e")
    page.click("#create-run")

    # 3. Watch it finish on the live run page: the first charts on the first screen; once it is
    # done, nothing says "live"; a CPU run has no GPU card; the throughput is a number too.
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run_id = int(re.search(r"/runs/(\d+)/$", page.url).group(1))
    assert_charts_first(page)
    page.wait_for_function(
        "document.querySelector('#run-state .status').textContent.trim() === 'done'", timeout=120_000
    )
    assert_fits(page, "run")
    assert "live" not in page.inner_text("#stream-state") + page.inner_text("#log-live")
    assert page.is_hidden("#gpu-card")
    assert re.fullmatch(r"[\d,.]+ images/s · [\d.]+% waiting for data", page.inner_text("#throughput-figure"))
    home.wait_for_selector(f"#home-runs tr[data-run-id='{run_id}'] .status-done")
    assert home.get_attribute(f"#home-runs tr[data-run-id='{run_id}'] a.long-name", "href") == f"/runs/{run_id}/"
    assert_fits(home, "home")
    home.close()

    # 4. Classify one image: top classes as a bar chart and the image as the network saw it.
    page.goto(f"{live_server_url}/runs/{run_id}/classify/")
    page.set_input_files("#classify-file", str(digit))
    page.wait_for_selector("#classify-chart .main-svg")
    assert page.locator("#classify-table tbody tr").count() == 3
    assert page.eval_on_selector("#classify-seen", "el => el.naturalWidth") == 8
    # The image as uploaded beside the image as the network saw it.
    page.wait_for_function("document.getElementById('classify-original').naturalWidth === 8")
    assert page.inner_text("#classify-original-caption") == "as uploaded: 8×8, digit.png"
    assert_fits(page, "classify")

    # 5. Test on the validation split and open the confusion matrix (normalised, then raw counts).
    page.goto(f"{live_server_url}/runs/{run_id}/test/")
    page.select_option("[name=source]", "val")
    page.click("#test-form button[type=submit]")
    page.wait_for_selector("#confusion .main-svg", timeout=60_000)
    normalised_max = page.evaluate("Math.max(...document.getElementById('confusion').data[0].z.flat())")
    page.uncheck("#confusion-normalised")
    page.wait_for_function("Math.max(...document.getElementById('confusion').data?.[0]?.z.flat() ?? [0]) > 1")
    assert normalised_max <= 1
    assert page.locator("#per-class tbody tr").count() == 3
    assert_fits(page, "test")

    # 6. Look inside: the first filters and activations.
    page.goto(f"{live_server_url}/runs/{run_id}/inside/")
    page.set_input_files("#inside-file", str(digit))
    page.wait_for_selector("#filters[src^='data:image/png']")
    assert page.locator("#activations img").count() == 2
    # Layers are tick boxes; the logits are bars named by class.
    page.check("#inside-layers input[value='classifier.3']")
    page.click("#inside-form button[type=submit]")
    page.wait_for_selector("#activations .value-bars")
    assert page.locator("#activations .value-bar .bar-label").all_inner_texts() == ["0", "1", "2"]
    assert_fits(page, "inside")

    # 7. Download the ONNX export and run it.
    page.goto(f"{live_server_url}/runs/{run_id}/export/")
    page.select_option("#export-format", "onnx")
    with page.expect_download(timeout=60_000) as info:
        page.click("#export-download")  # built by the worker while the page waits
    path = info.value.path()
    assert page.text_content("#export-status").endswith("is ready. Downloading…")
    with zipfile.ZipFile(path) as zf:
        model = zf.read(f"run{run_id}-onnx/model.onnx")
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    x = np.asarray(Image.open(digit), dtype=np.float32)[None, None] / 255
    assert session.run(None, {"input": x})[0].shape == (1, 3)
    assert_fits(page, "export")

    # 8. Every page at 1920x1080, and those the walk did not open at 1280x800, with the run's.
    others = {"runs": "/runs/", "queue": "/runs/queue/", "new-run": "/runs/new/", "datasets": "/datasets/",
              "new-dataset": "/datasets/new/", "gpus": "/gpus/", "benchmarks": "/benchmarks/",
              "compare": f"/runs/compare/?runs={run_id}"}  # fmt: skip
    walked = {"home": "/", "dataset": dataset_url.removeprefix(live_server_url), "run": f"/runs/{run_id}/",
              "classify": f"/runs/{run_id}/classify/", "test": f"/runs/{run_id}/test/",
              "inside": f"/runs/{run_id}/inside/", "export": f"/runs/{run_id}/export/"}  # fmt: skip
    for size, pages in ((SMALL, others), (LARGE, {**walked, **others})):
        page.set_viewport_size(size)
        for name, path in pages.items():
            page.goto(f"{live_server_url}{path}")
            if name == "run":
                assert_charts_first(page)
                # Charts side by side, as many as the width holds: the page uses the width it is given.
                columns = "getComputedStyle(document.getElementById('charts')).gridTemplateColumns.split(' ').length"
                assert page.evaluate(columns) == (3 if size == LARGE else 2)
                assert page.evaluate("document.getElementById('charts').clientWidth") > 0.9 * size["width"]
            assert_fits(page, name)
    assert not errors, errors
