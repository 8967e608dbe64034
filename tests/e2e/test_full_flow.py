"""The whole point-and-click flow in a real Chromium against daphne and the real worker: a new
dataset from an archive, a new run (two epochs on the CPU) through the wizard with its live
previews, watch it finish, classify an image, open the confusion matrix, look inside, and
download the ONNX export (then run it with onnxruntime)."""

from __future__ import annotations

import re
import zipfile

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image

from tests.conftest import log_in
from tests.workbench.inference.conftest import digits_zip

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_whole_flow_from_archive_to_onnx(live_server_url, celery_worker, page, owner, tmp_path):
    archive, digit = digits_zip(tmp_path / "digits.zip", classes=3, per_class=30)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, live_server_url, owner.username)

    # 1. A dataset from the archive, through the datasets wizard.
    page.goto(f"{live_server_url}/datasets/new/")
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
    page.wait_for_selector("#class-table", timeout=60_000)

    # 2. A new run from the runs list, with the live previews.
    page.goto(f"{live_server_url}/runs/")
    page.click("#new-run-link")
    page.wait_for_selector("#lr-chart .main-svg")
    assert "8×8, gray, 3 classes" in page.inner_text("#dataset-facts")
    page.wait_for_selector("tr[data-network=alexnet] .network-fit:has-text('needs images of at least')")
    page.wait_for_selector("text=Simulated GPU 1")  # the live devices table (polls /api/gpus/)
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

    # 3. Watch it finish on the live run page.
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run_id = int(re.search(r"/runs/(\d+)/$", page.url).group(1))
    page.wait_for_function(
        "document.querySelector('#run-state .status').textContent.trim() === 'done'", timeout=120_000
    )

    # 4. Classify one image: top classes as a bar chart and the image as the network saw it.
    page.goto(f"{live_server_url}/runs/{run_id}/classify/")
    page.set_input_files("#classify-file", str(digit))
    page.wait_for_selector("#classify-chart .main-svg")
    assert page.locator("#classify-table tbody tr").count() == 3
    assert page.eval_on_selector("#classify-seen", "el => el.naturalWidth") == 8

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

    # 6. Look inside: the first filters and activations.
    page.goto(f"{live_server_url}/runs/{run_id}/inside/")
    page.set_input_files("#inside-file", str(digit))
    page.wait_for_selector("#filters[src^='data:image/png']")
    assert page.locator("#activations img").count() == 2

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
    assert not errors, errors
