"""Issue 23's Done-when in Chromium, against daphne and the real worker, with a lab's own weights in
the store (no published file can be downloaded here): the Weights page says what to drop in for a
network that has none; a user finds a network in the zoo's picker, picks the store's weights in the
new-run form with a preset (whose fields stay editable) and a weights' average, previews the
augmentations, reads in the run's log which layers were replaced, watches the raw and the averaged
validation curves, and downloads the TorchScript export, which runs."""

from __future__ import annotations

import io
import re
import zipfile

import pytest
import torch

from tests.conftest import log_in
from tests.workbench.runs.web.test_new_run_page_e2e import make_digits, open_new_run

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ACCURACY_TRACES = "document.querySelector('[data-chart=accuracy]').data.filter((t) => t.y.length).map((t) => t.name)"


def test_it_fine_tunes_the_stores_weights_with_a_preset_and_exports(
    live_server_url, celery_worker, page, owner, staff_user, lab_weights
):
    log_in(page, live_server_url, staff_user.username)
    # The catalogue of files not here is folded; a filter opens it at what is asked for.
    page.goto(f"{live_server_url}/weights/?q=resnet18")
    text = page.inner_text("#catalogue")
    assert "WORKBENCH_WEIGHTS_DIR" in text and "resnet18-f37072fd.pth" in text

    dataset = make_digits(owner, side=8)
    log_in(page, live_server_url, owner.username)
    open_new_run(page, live_server_url, dataset)
    # The picker finds the zoo's networks by family.
    page.fill("#network-filter", "timm convnext")
    shown = page.eval_on_selector_all(
        "#network-table tbody tr:not(.filtered-out):not([hidden])", "rows => rows.map(r => r.dataset.network)"
    )
    assert "timm/convnext_atto" in shown and "resnet18" not in shown
    page.fill("#network-filter", "mobilenet")
    page.check("#network-mobilenet_v3_small")
    page.check("input[name=start_from][value=weights]")
    page.select_option("[name=stored_weights]", str(lab_weights.pk))
    chosen = page.inner_text("[name=stored_weights] option:checked")
    assert chosen == "mobilenet_v3_small: local weights lab (unverified)"
    page.select_option("#id_preset", "finetune_small")
    assert "transfer_learning_tutorial" in page.inner_text("#preset-source")
    assert page.input_value("#id_base_lr") == "0.01"  # the preset's, editable
    page.fill("#id_base_lr", "0.01")
    assert page.input_value("#id_base_lr") == "0.01"
    page.click("#augment-preview-button")  # eight augmented copies of a training image, as the run will
    page.wait_for_function("document.querySelectorAll('#augment-preview img').length === 8", timeout=30_000)
    assert "8 copies at 8×8" in page.inner_text("#augment-preview-status")
    for name, value in {"ema_decay": "0.9", "epochs": "2", "batch_size": "8", "num_workers": "0"}.items():
        page.fill(f"[name={name}]", value)
    page.check("input[name=device_mode][value=cpu]")
    page.click("#create-run")

    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run_id = int(re.search(r"/runs/(\d+)/$", page.url).group(1))
    page.wait_for_selector("#run-log:has-text('replaced 2 for the dataset')", timeout=120_000)
    assert "classifier.3.weight, classifier.3.bias" in page.inner_text("#run-log")
    page.wait_for_function(
        "document.querySelector('#run-state .status').textContent.trim() === 'done'", timeout=120_000
    )
    # The raw weights' validation and the average's, each epoch.
    page.wait_for_function(f"{ACCURACY_TRACES}.includes('top-1 (EMA)')")
    assert {"top-1", "top-1 (EMA)"} <= set(page.evaluate(ACCURACY_TRACES))

    page.goto(f"{live_server_url}/runs/{run_id}/export/")
    page.select_option("#export-format", "torchscript")
    with page.expect_download(timeout=60_000) as download:
        page.click("#export-download")
    with zipfile.ZipFile(download.value.path()) as bundle:
        model_file = next(name for name in bundle.namelist() if name.endswith("model.torchscript.pt"))
        model = torch.jit.load(io.BytesIO(bundle.read(model_file)))
    assert model(torch.rand(1, 1, 8, 8)).shape == (1, 3)
