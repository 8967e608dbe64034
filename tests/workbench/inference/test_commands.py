"""The inference commands (issue 22's "and the CLI"): `predict` (one image answered at once, many
as the task's many-images job), `test_run`, `inference_job` and `export`, through the same services
as the API, and their one-line refusals. A job or an export is run by the worker's own body
(`services.job_run`, `exports.export_build`), as the API's tests do; the checkpoints are the
session's trained LeNet and the task networks' seeded weights (conftest)."""

from __future__ import annotations

import io
import json
import re
import zipfile

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from PIL import Image

from tests.workbench.inference.conftest import task_run, val_images
from workbench.inference import exports, services
from workbench.inference.models import InferenceJob

pytestmark = pytest.mark.django_db

SHAPES = ["background", "square", "disc"]


def command(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*map(str, args), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def queued_job(text: str) -> InferenceJob:
    """The job a command said it queued, run as a worker runs it."""
    job = InferenceJob.objects.get(pk=int(re.match(r"job (\d+) queued", text)[1]))
    assert services.job_run(job_id=job.pk) == "done", InferenceJob.objects.get(pk=job.pk).error
    return job


def digit_pngs(run, folder, count: int = 3) -> list:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, image in enumerate(val_images(run, count)[0]):
        Image.fromarray(image).save(path := folder / f"digit{n}.png")
        paths.append(path)
    return paths


def test_it_classifies_one_image_as_the_api_does(digits_run, owner_client, tmp_path):
    [image] = digit_pngs(digits_run, tmp_path, 1)
    out, _ = command("predict", digits_run.pk, image, "--top-k", "3", "--format", "json")
    body = json.loads(out)
    with image.open("rb") as handle:
        api = owner_client.post(f"/api/runs/{digits_run.pk}/classify/", {"image": handle, "top_k": 3}).json()
    assert body["predictions"] == api["predictions"] and len(body["predictions"]) == 3
    table, _ = command("predict", digits_run.pk, image)
    assert table.splitlines()[1].split() == ["class", "probability"] and len(table.splitlines()) == 2 + 5


def test_it_detects_and_segments_one_image_and_writes_the_mask(owner, tmp_path):
    Image.new("RGB", (90, 60), (200, 40, 40)).save(image := tmp_path / "scene.png")
    detector = task_run(owner, "detection", ["square", "disc"])
    body = json.loads(command("predict", detector.pk, image, "--min-score", "0", "--format", "json")[0])
    assert (body["width"], body["height"]) == (90, 60) and body["boxes"]
    assert all(0 <= b["box"][0] <= b["box"][2] <= 90 and b["box"][3] <= 60 for b in body["boxes"])
    segmenter = task_run(owner, "segmentation", SHAPES)
    out, _ = command("predict", segmenter.pk, image, "--output", tmp_path / "mask.png")
    assert out.splitlines()[1].split() == ["class", "colour", "share"] and "background" in out
    assert Image.open(tmp_path / "mask.png").size == (90, 60)


def test_it_waits_for_the_workers_many_images_job_and_copies_its_results(
    celery_worker, transactional_db, owner, tmp_path
):
    run = task_run(owner, "segmentation", SHAPES)
    folder = tmp_path / "scenes"
    (folder / "sub").mkdir(parents=True)
    Image.new("RGB", (40, 30), (20, 200, 40)).save(folder / "a.png")
    Image.new("RGB", (20, 20), (20, 20, 200)).save(folder / "sub" / "b.png")
    (folder / "notes.txt").write_text("not an image")
    out, err = command("predict", run.pk, folder, "--wait", "--output", tmp_path / "segmented.zip")
    assert InferenceJob.objects.get().kind == "segment" and re.search(r"job \d+: done\nwrote .*segmented\.zip", err)
    assert "2 images" in out and "skipped 1 files (first: notes.txt" in out
    with zipfile.ZipFile(tmp_path / "segmented.zip") as archive:
        assert sorted(archive.namelist()) == ["masks/a.png", "masks/b.png", "results.csv"]
        assert archive.read("results.csv").decode().splitlines()[0] == "path,background,square,disc"


def test_it_queues_an_archive_or_images_and_says_how_to_follow_the_job(digits_run, tmp_path):
    images = digit_pngs(digits_run, tmp_path / "digits", 2)
    with zipfile.ZipFile(tmp_path / "digits.zip", "w") as archive:
        archive.write(images[0], "digits/0.png")
    out, _ = command("predict", digits_run.pk, tmp_path / "digits.zip")
    job = InferenceJob.objects.get(pk=int(re.match(r"job (\d+) queued", out)[1]))
    assert f"follow it with `manage.py inference_job {job.pk} --wait`" in out
    assert (job.kind, job.input_name, (job.folder / "upload.archive").is_file()) == ("classify", "digits.zip", True)
    job = InferenceJob.objects.get(pk=int(command("predict", digits_run.pk, *images, "--format", "json")[0]))
    assert job.input_name == "2 images" and sorted(p.name for p in (job.folder / "input").iterdir()) == [
        "digit0.png",
        "digit1.png",
    ]
    assert (
        command("inference_job", job.pk)[0]
        == f"job {job.pk} (classify many, run {digits_run.pk}, checkpoint best): queued\n"
    )


def test_it_tests_a_run_on_its_split_and_prints_the_measures(digits_run, tmp_path):
    out, _ = command("test_run", digits_run.pk)
    job = queued_job(out)
    assert (job.kind, job.source) == ("test", "val")  # the dataset has no test split
    table, _ = command("inference_job", job.pk)
    assert re.search(r"449 images: top-1 \d+\.\d\d%, top-5", table) and "confusion (rows: true class" in table
    body = json.loads(command("inference_job", job.pk, "--format", "json")[0])
    assert body["result"]["top1"] > 0.8 and len(body["result"]["confusion"]) == 10
    with pytest.raises(CommandError, match="has no results file to copy"):
        command("inference_job", job.pk, "--output", tmp_path / "x.csv")


def test_it_exports_once_a_worker_built_it_and_copies_the_zip(digits_run, tmp_path):
    target = tmp_path / "bundle.zip"
    out, _ = command("export", digits_run.pk, "--output", target)
    assert "is being built by a worker" in out and not target.exists()
    assert exports.export_build(run_id=digits_run.pk, fmt="bundle", checkpoint="best") == "ready"
    out, _ = command("export", digits_run.pk, "--format", "bundle", "--output", target, "--wait")
    assert out.startswith(f"wrote {target} (")
    with zipfile.ZipFile(target) as archive:
        assert f"run{digits_run.pk}-bundle/labels.txt" in archive.namelist()


def test_it_refuses_in_one_line_what_it_cannot_do(owner, other_user, digits_run, tmp_path):
    [image] = digit_pngs(digits_run, tmp_path, 1)
    (notes := tmp_path / "notes.txt").write_text("not an image")
    refusals = [
        (("predict", 999999, image), "no run with id 999999"),
        (("predict", digits_run.pk, image, "--owner", "bob"), f"run {digits_run.pk} does not belong to bob"),
        (("predict", digits_run.pk, notes), "notes.txt: "),
        (("predict", digits_run.pk, tmp_path / "gone.png"), "gone.png: no such file or folder"),
        (("predict", digits_run.pk, image, "--top-k", "0"), "top_k: must be between 1 and 100"),
        (("predict", digits_run.pk, image, "--checkpoint", "7"), "has no checkpoint at step 7"),
        (("test_run", digits_run.pk, "--source", "test"), "dataset 'digits' has no test split (it has train, val)"),
        (("inference_job", 999999), "no inference job with id 999999"),
    ]
    for args, message in refusals:
        with pytest.raises(CommandError, match=re.escape(message)) as refused:
            command(*args)
        assert "\n" not in str(refused.value) and str(settings.DATA_DIR) not in str(refused.value)
    ssdlite = task_run(owner, "detection", ["square", "disc"], network="ssdlite320_mobilenet_v3_large")
    with pytest.raises(CommandError, match=r"^format: Not available for ssdlite320_mobilenet_v3_large: "):
        command("export", ssdlite.pk, "--format", "onnx", "--output", tmp_path / "model.zip")
    assert not (ssdlite.run_dir / "exports").exists()  # refused before anything was queued or built
