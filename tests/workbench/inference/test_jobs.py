"""Classify-many and test jobs on the real Celery worker (the engine runs in a subprocess there):
progress, results, CSV, the confusion matrix, the mistakes gallery, and failures with a message."""

from __future__ import annotations

import csv
import io
import zipfile

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image

from tests.support.waiting import wait_until
from tests.workbench.inference.conftest import val_images
from trainer.inference import load_checkpoint_classifier
from workbench.inference import engine, services
from workbench.inference.models import InferenceJob

pytestmark = [pytest.mark.slow]


def wait_done(client, job_id: int, timeout: float = 120) -> dict:
    def finished() -> dict | None:
        job = client.get(reverse("api-inference-job", args=[job_id])).json()
        return job if job["state"] in ("done", "failed") else None

    return wait_until(finished, what=f"inference job {job_id} to finish", timeout=timeout, interval=0.3)


def archive(files: dict[str, bytes]) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return SimpleUploadedFile("upload.zip", buffer.getvalue(), content_type="application/zip")


def png_bytes(array) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def test_it_tests_on_the_validation_split_in_the_background(celery_worker, transactional_db, owner_client, digits_run):
    response = owner_client.post(reverse("api-run-test", args=[digits_run.pk]), {"source": "val"},
                                 content_type="application/json")  # fmt: skip
    assert response.status_code == 202 and response.json()["state"] == "queued"
    job = wait_done(owner_client, response.json()["id"])
    assert job["state"] == "done", job["error"]
    assert job["progress"] == {"done": 449, "total": 449, "percent": 100.0}
    result = job["result"]
    # The same numbers computed here, in this process, with the trainer's classifier.
    classifier = load_checkpoint_classifier(services.checkpoint_path(run=digits_run, which="best"))
    labels, probs, _ = engine.predict_split(classifier, digits_run.dataset.path / "val_db")
    assert result["top1"] == pytest.approx(float((probs.argmax(1) == labels).mean()))
    assert result["count"] == 449 and result["top_k"] == 5 and result["top5"] >= result["top1"]
    confusion = np.array(result["confusion"])
    assert confusion.shape == (10, 10) and confusion.sum() == 449 and np.trace(confusion) == round(449 * result["top1"])
    row = result["per_class"][3]
    assert row["support"] == confusion[3].sum() and row["recall"] == pytest.approx(confusion[3, 3] / confusion[3].sum())
    assert row["precision"] == pytest.approx(confusion[3, 3] / confusion[:, 3].sum())
    mistakes = result["mistakes"]
    assert 0 < len(mistakes) <= 24 and mistakes == sorted(mistakes, key=lambda m: -m["confidence"])
    assert all(m["true"] != m["predicted"] for m in mistakes)
    image = owner_client.get(reverse("inference-mistake", args=[digits_run.pk, job["id"], 0]))
    assert image["Content-Type"] == "image/png" and Image.open(io.BytesIO(image.getvalue())).size == (8, 8)
    page = owner_client.get(job["page"]).content.decode()
    assert 'id="confusion"' in page and "Most confident mistakes" in page


def test_it_classifies_an_archive_in_the_background(celery_worker, transactional_db, owner_client, digits_run):
    images, labels = val_images(digits_run, 12)
    pairs = enumerate(zip(images, labels, strict=True))
    files = {f"batch/{i}_{label}.png": png_bytes(image) for i, (image, label) in pairs}
    files["batch/readme.txt"] = b"not an image"
    response = owner_client.post(reverse("api-run-classify-many", args=[digits_run.pk]), {"archive": archive(files)})
    assert response.status_code == 202
    job = wait_done(owner_client, response.json()["id"])
    assert job["state"] == "done", job["error"]
    assert job["result"]["count"] == 12
    [skipped] = job["result"]["skipped"]
    assert skipped["path"] == "batch/readme.txt" and skipped["reason"].startswith("not an image (content is not")
    rows = owner_client.get(job["rows"]).json()["results"]
    assert len(rows) == 12 and all(len(row["top"]) == 5 for row in rows)
    # Each row's image as a thumbnail, for the job page's table.
    thumb = owner_client.get(reverse("inference-thumb", args=[digits_run.pk, job["id"], int(rows[0]["thumb"][:-4])]))
    assert thumb["Content-Type"] == "image/png" and Image.open(io.BytesIO(thumb.getvalue())).size == (8, 8)
    right = sum(row["top"][0]["label"] == row["path"].rsplit("_", 1)[1].removesuffix(".png") for row in rows)
    assert right >= 9
    response = owner_client.get(job["csv"])
    table = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert table[0][:3] == ["path", "label_1", "probability_1"] and len(table) == 13
    assert not (InferenceJob.objects.get(pk=job["id"]).folder / "input").exists()  # the upload is cleaned up


def test_it_tests_an_uploaded_labelled_list(celery_worker, transactional_db, owner_client, digits_run):
    images, labels = val_images(digits_run, 10)
    files = {f"imgs/{i}.png": png_bytes(image) for i, image in enumerate(images)}
    files["list.txt"] = "\n".join(f"imgs/{i}.png {label}" for i, label in enumerate(labels)).encode()
    response = owner_client.post(reverse("api-run-test", args=[digits_run.pk]),
                                 {"source": "upload", "archive": archive(files)})  # fmt: skip
    job = wait_done(owner_client, response.json()["id"])
    assert job["state"] == "done", job["error"]
    assert job["result"]["count"] == 10 and sum(map(sum, job["result"]["confusion"])) == 10


def test_it_fails_a_job_with_a_message_that_names_the_problem(celery_worker, transactional_db, owner_client,
                                                              digits_run):  # fmt: skip
    response = owner_client.post(reverse("api-run-classify-many", args=[digits_run.pk]),
                                 {"archive": archive({"a.txt": b"text", "b.txt": b"more"})})  # fmt: skip
    job = wait_done(owner_client, response.json()["id"])
    assert job["state"] == "failed" and job["error"].startswith("none of the 2 files is an image")
    bad = SimpleUploadedFile("x.zip", b"PK\x03\x04 broken")
    response = owner_client.post(reverse("api-run-classify-many", args=[digits_run.pk]), {"archive": bad})
    job = wait_done(owner_client, response.json()["id"])
    assert job["state"] == "failed"
    assert "not a zip or tar archive" in job["error"]
    files = {"cats/1.png": png_bytes(val_images(digits_run, 1)[0][0])}
    response = owner_client.post(reverse("api-run-test", args=[digits_run.pk]),
                                 {"source": "upload", "archive": archive(files)})  # fmt: skip
    job = wait_done(owner_client, response.json()["id"])
    assert job["state"] == "failed" and "cats/1.png: its folder is not a class of this run" in job["error"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"source": "test"}, "source", "dataset 'digits' has no test split (it has train, val)"),
        ({"source": "upload"}, "images", "upload an archive (zip, tar) or one or more images"),
        ({"source": "moon"}, "source", "'moon' is not one of val, test, upload"),
        ({"source": "val", "checkpoint": "77"}, "checkpoint", "has no checkpoint at step 77"),
    ],
)
def test_it_refuses_a_job_it_cannot_run(owner_client, digits_run, data, field, message):
    response = owner_client.post(reverse("api-run-test", args=[digits_run.pk]), data)
    assert response.status_code == 400
    assert message in response.json()[field][0]
    assert not InferenceJob.objects.exists()


@pytest.mark.django_db
def test_a_duplicate_delivery_does_nothing(digits_run, owner):
    job = InferenceJob.objects.create(owner=owner, run=digits_run, kind="test", source="val",
                                      state=InferenceJob.State.DONE)  # fmt: skip
    assert services.job_run(job_id=job.pk) == "not queued"


@pytest.mark.django_db
def test_it_fails_a_job_whose_worker_stopped_reporting(owner_client, digits_run, owner):
    from datetime import timedelta

    from django.utils import timezone

    old = timezone.now() - timedelta(seconds=InferenceJob.STALE_SECONDS + 5)
    stale = InferenceJob.objects.create(owner=owner, run=digits_run, kind="test", source="val", state="running",
                                        heartbeat_at=old)  # fmt: skip
    alive = InferenceJob.objects.create(owner=owner, run=digits_run, kind="test", source="val", state="running",
                                        heartbeat_at=timezone.now())  # fmt: skip
    body = owner_client.get(reverse("api-inference-job", args=[stale.pk])).json()
    assert body["state"] == "failed" and "stopped reporting for 5 minutes" in body["error"]
    assert owner_client.get(reverse("api-inference-job", args=[alive.pk])).json()["state"] == "running"
    page = owner_client.get(reverse("inference-job", args=[digits_run.pk, stale.pk])).content.decode()
    assert "start the job again" in page


@pytest.mark.django_db
def test_it_fails_stale_jobs_on_the_housekeeping_pass_without_a_viewer(digits_run, owner):
    from datetime import timedelta

    from django.utils import timezone

    from workbench.workers import signals

    old = timezone.now() - timedelta(seconds=InferenceJob.STALE_SECONDS + 5)
    stale = InferenceJob.objects.create(owner=owner, run=digits_run, kind="test", source="val", state="running",
                                        heartbeat_at=old)  # fmt: skip
    alive = InferenceJob.objects.create(owner=owner, run=digits_run, kind="test", source="val", state="running",
                                        heartbeat_at=timezone.now())  # fmt: skip
    # The pass's signal itself: housekeeping_once would skip it while the suite's worker holds the
    # pass lock (its lock is tested in tests/workbench/workers/test_heartbeat.py).
    signals.housekeeping.send_robust(sender=None, hostname="beat@tests")
    assert InferenceJob.objects.get(pk=stale.pk).state == "failed"
    assert InferenceJob.objects.get(pk=alive.pk).state == "running"
