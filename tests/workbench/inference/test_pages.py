"""The inference pages (classify, test, a job, look inside, download) and the API schema/docs."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from workbench.inference.models import InferenceJob

pytestmark = pytest.mark.django_db


def test_it_shows_the_classify_page_with_checkpoints_and_actions(owner_client, digits_run):
    body = owner_client.get(reverse("inference-classify", args=[digits_run.pk])).content.decode()
    assert 'id="dropzone"' in body and '<option value="best">best: step' in body
    assert f'href="{reverse("inference-export", args=[digits_run.pk])}"' in body
    assert "static/inference/classify.js" in body and "static/vendor/plotly.min.js" in body


def test_it_starts_a_test_from_the_page_and_shows_its_progress(owner_client, digits_run):
    page = owner_client.get(reverse("inference-test", args=[digits_run.pk]))
    assert [value for value, _ in page.context["form"].fields["source"].choices] == ["val", "upload"]
    url = reverse("inference-test", args=[digits_run.pk])
    response = owner_client.post(url, {"checkpoint": "best", "source": "val"})
    job = InferenceJob.objects.get()
    assert response.status_code == 302 and response.url == reverse("inference-job", args=[digits_run.pk, job.pk])
    assert (job.kind, job.source, job.checkpoint, job.state) == ("test", "val", "best", "queued")
    body = owner_client.get(response.url).content.decode()
    assert 'id="job-progress"' in body and 'data-kind="test"' in body


def test_it_names_the_problem_on_the_job_forms(owner_client, digits_run):
    url = reverse("inference-classify", args=[digits_run.pk])
    response = owner_client.post(url, {"checkpoint": "best"})
    assert "Upload an archive (zip, tar) or pick one or more images." in response.content.decode()
    response = owner_client.post(url, {"checkpoint": "nope", "archive": SimpleUploadedFile("a.zip", b"x")})
    assert "Select a valid choice" in response.content.decode()
    response = owner_client.post(url, {"checkpoint": "best", "archive": SimpleUploadedFile("a.zip", b"x"),
                                       "images": [SimpleUploadedFile("b.png", b"y")]})  # fmt: skip
    assert "Upload either an archive or images, not both." in response.content.decode()
    assert not InferenceJob.objects.exists()


def test_it_shows_the_look_inside_and_download_pages(owner_client, digits_run):
    page = owner_client.get(reverse("inference-inside", args=[digits_run.pk]))
    assert page.context["default_layers"] == ["features.0", "features.2"]
    # Tick boxes (no Ctrl-click), each layer named with its kind.
    box = '<input type="checkbox" name="layers" value="features.0" checked> features.0 <span class="hint">Conv2d</span>'
    assert box in page.content.decode()
    body = owner_client.get(reverse("inference-export", args=[digits_run.pk])).content.decode()
    assert f'action="{reverse("api-run-download", args=[digits_run.pk])}"' in body and 'value="onnx"' in body


def test_it_says_when_there_is_no_checkpoint(owner_client, digits_run):
    import shutil

    shutil.rmtree(digits_run.run_dir)
    for name in ("inference-classify", "inference-test", "inference-inside", "inference-export"):
        assert "no checkpoint yet" in owner_client.get(reverse(name, args=[digits_run.pk])).content.decode()


def test_it_keeps_other_users_jobs_and_pages_out_of_reach(client, other_user, owner, digits_run):
    job = InferenceJob.objects.create(owner=owner, run=digits_run, kind="test", source="val")
    client.force_login(other_user)
    assert client.get(reverse("inference-classify", args=[digits_run.pk])).status_code == 404
    assert client.get(reverse("inference-job", args=[digits_run.pk, job.pk])).status_code == 404
    assert client.get(reverse("api-inference-job", args=[job.pk])).status_code == 404


def test_it_deletes_a_finished_job_but_not_an_active_one(owner_client, owner, digits_run):
    job = InferenceJob.objects.create(owner=owner, run=digits_run, kind="test", source="val")
    assert owner_client.delete(reverse("api-inference-job", args=[job.pk])).status_code == 409
    InferenceJob.objects.filter(pk=job.pk).update(state="done")
    assert owner_client.delete(reverse("api-inference-job", args=[job.pk])).status_code == 204
    assert not InferenceJob.objects.exists()


def test_it_serves_the_openapi_schema_and_offline_docs(owner_client):
    from django.test import Client

    assert Client().get("/api/schema/").status_code == 401
    schema = owner_client.get("/api/schema/", {"format": "json"}).json()
    assert schema["info"]["title"] == "Workbench API"
    for path in ("/api/runs/{id}/classify/", "/api/runs/{id}/test/", "/api/runs/{id}/download/", "/api/runs/",
                 "/api/datasets/", "/api/inference/jobs/{id}/"):  # fmt: skip
        assert path in schema["paths"], path
    download = schema["paths"]["/api/runs/{id}/download/"]["get"]
    assert {p["name"] for p in download["parameters"]} >= {"format", "checkpoint"}
    for url in ("/api/docs/", "/api/redoc/"):
        body = owner_client.get(url).content.decode()
        assert "/static/drf_spectacular_sidecar/" in body and "cdn" not in body.lower(), url


def test_the_schema_generates_without_warnings(tmp_path):
    # drf-spectacular's deploy check (manage.py check --deploy) fails on any warning.
    from django.core.management import call_command

    call_command("spectacular", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    text = (tmp_path / "schema.yaml").read_text()
    assert "operationId: datasets_list" in text and "operationId: runs_classify_create" in text
