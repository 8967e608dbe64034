"""Downloads: zips of the bundle, TorchScript and ONNX, built by a worker, whose models give the
same top-1 as the PyTorch checkpoint on the whole validation split."""

from __future__ import annotations

import io
import json
import os
import time
import uuid
import zipfile

import numpy as np
import onnxruntime as ort
import pytest
import torch
from django.urls import reverse

from tests.support.waiting import wait_until
from trainer.data import LMDBImageDataset
from trainer.datum import DatumLMDB
from trainer.inference import load_bundle, load_checkpoint_classifier
from workbench.inference import exports, services
from workbench.workers.models import WorkerHost

pytestmark = pytest.mark.django_db


def download(client, run, **params):
    """Asks as a client of the API does: again after Retry-After while a worker builds it."""
    url = reverse("api-run-download", args=[run.pk])

    def answered():
        response = client.get(url, params)
        if response.status_code != 202:
            return response
        assert response.json()["state"] == "building" and response["Retry-After"] == "2"
        return None

    response = wait_until(
        answered, what=f"the download of run {run.pk} {params} to be built", timeout=120, interval=0.5
    )
    assert response.status_code == 200, getattr(response, "data", response)
    assert response["Content-Type"] == "application/zip"
    return zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:FutureWarning")
def test_it_exports_models_that_agree_with_pytorch_on_the_validation_split(
    celery_worker, transactional_db, owner_client, digits_run, tmp_path
):
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
    assert report["dataset_check"] == {"split": "val", "images": 64, "same_top1": 64, "compared": 64, "checked": True}
    session = ort.InferenceSession(onnx_zip.read(f"{folder}/model.onnx"), providers=["CPUExecutionProvider"])
    onnx_top1 = session.run(None, {"input": inputs.numpy()})[0].argmax(1)
    assert (onnx_top1 == want).all()

    ts_zip = download(owner_client, digits_run, format="torchscript", checkpoint="last")
    report = json.loads(ts_zip.read(f"run{digits_run.pk}-torchscript/export.json"))
    assert report["dataset_check"] == {"split": "val", "images": 64, "same_top1": 64, "compared": 64, "checked": True}
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
    first = exports.export_zip(run=digits_run, fmt="bundle", checkpoint="best")
    mtime = first.stat().st_mtime_ns
    again = exports.export_zip(run=digits_run, fmt="bundle", checkpoint="best")
    assert again == first and again.stat().st_mtime_ns == mtime


def test_it_queues_a_build_once_and_again_when_it_was_lost(
    owner_client, digits_run, django_capture_on_commit_callbacks
):
    url = reverse("api-run-download", args=[digits_run.pk])
    with django_capture_on_commit_callbacks() as queued:
        response = owner_client.get(url, {"format": "onnx"})
    assert response.status_code == 202 and response["Retry-After"] == "2"
    assert response.json() == {
        "state": "building",
        "detail": "The onnx export of checkpoint best is being built; ask again in a few seconds.",
        "retry_after": 2,
    }
    assert len(queued) == 1  # no worker here: it stays queued
    with django_capture_on_commit_callbacks() as queued_again:
        assert owner_client.get(url, {"format": "onnx", "status": "1"}).status_code == 202
    assert queued_again == []  # asked again while queued: not queued twice
    marker = next((digits_run.run_dir / "exports").glob("*-onnx.zip.state"))
    assert json.loads(marker.read_text())["state"] == "queued"
    old = time.time() - exports.EXPORT_STALE_SECONDS - 1
    os.utime(marker, (old, old))  # no worker took it for that long: its message was lost
    with django_capture_on_commit_callbacks() as requeued:
        assert owner_client.get(url, {"format": "onnx"}).status_code == 202
    assert len(requeued) == 1
    # Once a worker took it, that worker's heartbeats decide, whatever the marker's age.
    host = WorkerHost.objects.create(hostname="w1@box", boot_id=uuid.uuid4())
    taken = {"state": "taken", "worker": "w1@box", "boot_id": str(host.boot_id), "lost": 0}
    marker.write_text(json.dumps(taken))
    os.utime(marker, (old, old))
    with django_capture_on_commit_callbacks() as building:
        assert owner_client.get(url, {"format": "onnx"}).status_code == 202
    assert building == []  # its worker lives: still building
    WorkerHost.objects.filter(pk=host.pk).update(boot_id=uuid.uuid4())  # the worker restarted
    with django_capture_on_commit_callbacks() as restarted:
        assert owner_client.get(url, {"format": "onnx"}).status_code == 202
    assert len(restarted) == 1 and json.loads(marker.read_text())["lost"] == 1
    # Its worker dies again (say the export needs more memory than it has): it fails, said once.
    marker.write_text(json.dumps({**taken, "lost": 1}))
    response = owner_client.get(url, {"format": "onnx"})
    assert response.status_code == 400
    assert response.json()["format"] == [
        "the onnx export was interrupted 2 times (worker w1@box restarted); it may need more memory than the worker has"
    ]
    with django_capture_on_commit_callbacks() as fresh:
        assert owner_client.get(url, {"format": "onnx"}).status_code == 202  # asking again starts afresh
    assert len(fresh) == 1 and json.loads(marker.read_text())["lost"] == 0


def test_it_says_once_why_a_build_failed_then_builds_again(
    owner_client, digits_run, django_capture_on_commit_callbacks
):
    best = services.checkpoint_path(run=digits_run, which="best")
    best.write_bytes(b"not a checkpoint")  # as a worker would find a damaged file
    assert exports.export_build(run_id=digits_run.pk, fmt="bundle", checkpoint="best") == "failed"
    url = reverse("api-run-download", args=[digits_run.pk])
    response = owner_client.get(url, {"format": "bundle", "status": "1"})
    assert response.status_code == 400
    assert response.json()["format"][0].startswith("the bundle export failed:")
    with django_capture_on_commit_callbacks() as queued:
        assert owner_client.get(url, {"format": "bundle"}).status_code == 202  # asking again tries again
    assert len(queued) == 1
    assert not list((digits_run.run_dir / "exports").glob("*.zip"))  # nothing half-written
    state = next((digits_run.run_dir / "exports").glob("*-bundle.zip.state"))
    assert json.loads(state.read_text())["state"] == "queued"


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


def test_it_downloads_a_snapshot_by_step_and_hides_other_users_runs(
    celery_worker, transactional_db, client, owner_client, other_user, digits_run
):
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
