"""The download page: it says beforehand what each format holds for the run's network, it throws
nothing in the browser when the run has no checkpoint, and LeNet on 32x32 images (the issue's
case) exports to ONNX through the workbench's own export path, checked on the dataset."""

from __future__ import annotations

import shutil
import zipfile

import pytest
from django.urls import reverse

from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from tests.support.trainer_data import make_dataset_folder
from trainer.config import config_from_dict
from trainer.run import train
from workbench.inference import exports
from workbench.runs.models import Run
from workbench.runs.services import run_create


def test_it_says_what_each_format_holds_before_it_is_asked_for(owner_client, digits_run):
    body = owner_client.get(reverse("inference-export", args=[digits_run.pk])).content.decode()
    assert "What each format holds for lenet" in body
    assert "plain PyTorch cannot rebuild it" in body  # the bundle of the workbench's own LeNet
    assert "for 1×8×8 images and any batch size" in body  # TorchScript and ONNX
    assert "disabled" not in body.split('id="export-format"')[1].split("</select>")[0]


@pytest.fixture
def lenet32(owner, tmp_path):
    dataset = make_dataset_row(
        owner, name="colour 32", image_width=32, image_height=32, channels=3,
        labels=["a", "b", "c"], splits={"train": {"count": 24}, "val": {"count": 12}},
    )  # fmt: skip
    shutil.rmtree(dataset.path, ignore_errors=True)
    make_dataset_folder(dataset.path, size=32, channels=3)
    run = run_create(owner=owner, dataset=dataset, name="lenet 32", network="lenet", config={"epochs": 1},
                     device_request={"kind": "cpu"})  # fmt: skip
    shutil.rmtree(run.run_dir, ignore_errors=True)
    config = {"run_dir": str(run.run_dir), "network": "lenet", "devices": ["cpu"], "epochs": 1, "batch_size": 8,
              "data": {"dataset": str(dataset.path), "num_workers": 0}}  # fmt: skip
    assert train(config_from_dict(config)) == 0
    Run.objects.filter(pk=run.pk).update(state=Run.State.DONE, progress=1.0)
    return run


def test_it_exports_lenet_on_32x32_images_to_onnx(lenet32):
    path = exports.export_zip(run=lenet32, fmt="onnx")
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        report = archive.read(f"run{lenet32.pk}-onnx/export.json").decode()
    assert f"run{lenet32.pk}-onnx/model.onnx" in names
    assert '"same_top1": 12' in report  # all 12 validation images agree with PyTorch


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_shows_the_download_page_of_a_run_without_checkpoint_without_errors(live_server_url, page, owner):
    dataset = make_dataset_row(owner, name="d", image_width=8,
                                     image_height=8, channels=1, labels=["0", "1"])  # fmt: skip
    run = run_create(owner=owner, dataset=dataset, name="fresh", network="lenet", config={"epochs": 1},
                     device_request={"kind": "cpu"})  # fmt: skip
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("response", lambda response: errors.append(response.url) if response.status >= 400 else None)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/export/")
    page.wait_for_load_state("networkidle")
    assert "no checkpoint yet" in page.locator("main").inner_text()
    assert errors == []
