"""Downloads: zips of the bundle, TorchScript and ONNX, whose models give the same top-1 as the
PyTorch checkpoint on the whole validation split."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import onnxruntime as ort
import pytest
import torch
from django.urls import reverse

from trainer.data import LMDBImageDataset
from trainer.datum import DatumLMDB
from trainer.inference import load_bundle, load_checkpoint_classifier
from workbench.inference import services

pytestmark = pytest.mark.django_db


def download(client, run, **params):
    response = client.get(reverse("api-run-download", args=[run.pk]), params)
    assert response.status_code == 200, getattr(response, "data", response)
    assert response["Content-Type"] == "application/zip"
    return zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:FutureWarning")
def test_it_exports_models_that_agree_with_pytorch_on_the_validation_split(owner_client, digits_run, tmp_path):
    classifier = load_checkpoint_classifier(services.checkpoint_path(run=digits_run, which="best"))
    db = DatumLMDB(digits_run.dataset.path / "val_db")
    split = LMDBImageDataset(db)
    images = torch.stack([split[i][0] for i in range(len(split))])
    labels = np.array([split[i][1] for i in range(len(split))])
    db.close()
    inputs = classifier.normalize(images)
    with torch.no_grad():
        want = classifier.model(inputs).argmax(1).numpy()
    assert len(want) == 449 and (want == labels).mean() > 0.8  # a really trained model

    onnx_zip = download(owner_client, digits_run, format="onnx", checkpoint="best")
    folder = f"run{digits_run.pk}-onnx"
    names = set(onnx_zip.namelist())
    assert {
        f"{folder}/{n}"
        for n in (
            "model.onnx",
            "model.safetensors",
            "labels.txt",
            "preprocessing.json",
            "config.json",
            "README.txt",
            "mean.npy",
            "export.json",
        )
    } <= names
    report = json.loads(onnx_zip.read(f"{folder}/export.json"))
    assert report["onnx_check"]["same_top1"] is True and report["format"] == "onnx"
    assert report["dataset_check"] == {"split": "val", "images": 64, "same_top1": 64}
    session = ort.InferenceSession(onnx_zip.read(f"{folder}/model.onnx"), providers=["CPUExecutionProvider"])
    onnx_top1 = session.run(None, {"input": inputs.numpy()})[0].argmax(1)
    assert (onnx_top1 == want).all()

    ts_zip = download(owner_client, digits_run, format="torchscript", checkpoint="last")
    report = json.loads(ts_zip.read(f"run{digits_run.pk}-torchscript/export.json"))
    assert report["dataset_check"] == {"split": "val", "images": 64, "same_top1": 64}
    scripted = torch.jit.load(io.BytesIO(ts_zip.read(f"run{digits_run.pk}-torchscript/model.torchscript.pt")))
    with torch.no_grad():
        assert (scripted(inputs).argmax(1).numpy() == want).all()

    bundle_zip = download(owner_client, digits_run, format="bundle")
    bundle_zip.extractall(tmp_path)
    bundle = load_bundle(tmp_path / f"run{digits_run.pk}-bundle")
    assert bundle.labels == [str(d) for d in range(10)]
    with torch.no_grad():
        assert (bundle.model(inputs).argmax(1).numpy() == want).all()
    readme = bundle_zip.read(f"run{digits_run.pk}-bundle/README.txt").decode()
    assert "plain PyTorch" in readme and "model.torchscript.pt" not in bundle_zip.namelist()


def test_it_caches_exports_per_checkpoint_file(digits_run):
    first = services.export_zip(run=digits_run, fmt="bundle", checkpoint="best")
    mtime = first.stat().st_mtime_ns
    again = services.export_zip(run=digits_run, fmt="bundle", checkpoint="best")
    assert again == first and again.stat().st_mtime_ns == mtime


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"format": "caffe"}, "format", "'caffe' is not one of bundle, torchscript, onnx"),
        ({"checkpoint": "999"}, "checkpoint", "has no checkpoint at step 999 (kept: "),
        ({"checkpoint": "newest"}, "checkpoint", "'newest' is not best, last or a step number"),
    ],
)
def test_it_names_the_problem_of_a_download(owner_client, digits_run, params, field, message):
    response = owner_client.get(reverse("api-run-download", args=[digits_run.pk]), params)
    assert response.status_code == 400
    assert message in response.json()[field][0]


def test_it_downloads_a_snapshot_by_step_and_hides_other_users_runs(client, owner_client, other_user, digits_run):
    step = services.checkpoint_choices(run=digits_run)[-1]["value"]
    assert step.isdigit()
    download(owner_client, digits_run, format="bundle", checkpoint=step)
    client.force_login(other_user)
    assert client.get(reverse("api-run-download", args=[digits_run.pk])).status_code == 404


def test_it_says_when_a_run_has_no_checkpoint_yet(owner_client, digits_run):
    import shutil

    shutil.rmtree(digits_run.run_dir)
    response = owner_client.get(reverse("api-run-download", args=[digits_run.pk]))
    assert response.status_code == 400
    assert "has no checkpoint yet" in response.json()["checkpoint"][0]
