"""Detection and segmentation runs' jobs (issue 22): tests on the test split (per-class AP and its
precision-recall curve, per-class IoU and Dice, the worst images first), detect-many through the
one job runner, and exports checked against PyTorch. The jobs run in the real engine subprocess;
the checkpoints are the networks' seeded untrained weights (conftest.task_run)."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.urls import reverse
from PIL import Image

from tests.workbench.inference.conftest import task_run
from workbench.inference import exports, services
from workbench.inference import job as job_process
from workbench.inference.models import InferenceJob

pytestmark = pytest.mark.django_db

SHAPES = ["background", "square", "disc"]


def run_job(run, kind: str, **kwargs) -> dict:
    job = services.job_create(owner=run.owner, run=run, kind=kind, **kwargs)
    assert services.job_run(job_id=job.pk) == "done", InferenceJob.objects.get(pk=job.pk).error
    job.refresh_from_db()
    return job


def test_it_tests_a_segmentation_run_per_class_with_the_worst_images_first(owner, owner_client):
    run = task_run(owner, "segmentation", SHAPES, test_images=3)
    # The build's names of the split's images (datasets/build.py): the worst images are named by them.
    (run.dataset.path / "test_names.json").write_text(json.dumps(["a/0.png", "a/1.png", "b/2.png"]))
    job = run_job(run, InferenceJob.Kind.TEST, source=InferenceJob.Source.TEST)
    result = owner_client.get(reverse("api-inference-job", args=[job.pk])).json()["result"]
    assert (result["task"], result["count"]) == ("segmentation", 3)
    classes = result["per_class"]
    assert [c["label"] for c in classes] == SHAPES and sum(c["pixels"] for c in classes) == 3 * 32 * 32
    judged = [c["iou"] for c in classes if c["iou"] is not None]
    assert result["miou"] == pytest.approx(sum(judged) / len(judged))
    assert all(0 <= c["dice"] <= 1 and c["dice"] >= c["iou"] for c in classes if c["iou"] is not None)
    # The seeded untrained network calls every pixel background, and the test says so in words.
    assert [c["iou"] for c in classes[1:]] == [0.0, 0.0] and classes[0]["accuracy"] == 1.0
    assert result["notes"] == ["every pixel is predicted as background: the network has not separated any class yet"]
    scores = [w["miou"] for w in result["worst"]]
    assert len(scores) == 3 and scores == sorted(scores)
    assert [w["name"] for w in result["worst"]] == [
        ["a/0.png", "a/1.png", "b/2.png"][w["index"]] for w in result["worst"]
    ]
    picture = owner_client.get(reverse("inference-worst", args=[run.pk, job.pk, 0]))
    width, height = Image.open(io.BytesIO(b"".join(picture.streaming_content))).size
    assert (width, height) == (2 * 192 + 8, 192)  # ground truth beside the prediction, drawn larger
    page = owner_client.get(reverse("inference-job", args=[run.pk, job.pk])).content.decode()
    assert "inference/task_job.js" in page and 'id="pr-curves"' in page
    # The page names the task's measures from its row (task_table.TaskRow.test_page), not its script.
    assert '<h2 id="test-title">Segmentation</h2>' in page and '<h2 id="worst-title">Lowest mean IoU first' in page
    shown = json.loads(page.split('id="test-page" type="application/json">')[1].split("</script>")[0])
    assert (shown["worst"], shown["count"], shown["curves"]) == (["miou", "mIoU"], ["pixels", "Pixels"], False)


def test_it_tests_a_detector_with_per_class_ap_and_detects_many_images(owner, owner_client, tmp_path):
    run = task_run(owner, "detection", ["square", "disc"], test_images=2)
    # The test in this process (the segmentation test above goes through the engine's subprocess).
    spec = {
        "kind": "test",
        "checkpoint": str(services.checkpoint_path(run=run)),
        "out": str(tmp_path / "out"),
        "split_db": str(run.dataset.path / "test_db"),
        "targets_db": str(run.dataset.path / "test_targets_db"),
    }
    result = job_process.run_job(spec, lambda done, total: None)
    assert (result["task"], result["count"]) == ("detection", 2)
    assert {c["label"] for c in result["per_class"]} <= {"square", "disc"}
    assert sum(c["instances"] for c in result["per_class"]) == 4  # two shapes drawn in each image
    for curve in result["pr_curves"]:  # COCO's recall points at IoU 0.5, precision in 0..1
        assert curve["recall"] == sorted(curve["recall"]) and all(0 <= p <= 1 for p in curve["precision"])
    assert 0 <= result["map_50"] <= 1 and [w["ap50"] for w in result["worst"]] == sorted(
        w["ap50"] for w in result["worst"]
    )
    # Words only where it found nothing (test_it_says_when_a_tested_detector_found_nothing).
    assert result["notes"] == [] if result["map_50"] > 0 else "has not learned" in result["notes"][0]

    images = []
    for name, size in (("wide.png", (80, 40)), ("notes.txt", None)):
        buffer = io.BytesIO(b"not an image")
        if size:
            Image.new("RGB", size, (200, 40, 40)).save(buffer := io.BytesIO(), format="PNG")
        buffer.seek(0)
        buffer.name = name
        images.append(buffer)
    answer = owner_client.post(reverse("api-run-detect-many", args=[run.pk]), {"images": images})
    assert answer.status_code == 202, answer.content
    job = InferenceJob.objects.get(pk=answer.json()["id"])
    assert (job.kind, services.job_run(job_id=job.pk)) == ("detect", "done")
    job.refresh_from_db()
    assert job.result["count"] == 1 and job.result["skipped"][0]["path"] == "notes.txt"
    [row] = owner_client.get(reverse("api-inference-job-rows", args=[job.pk])).json()["results"]
    assert (row["path"], row["width"], row["height"]) == ("wide.png", 80, 40)
    lines = b"".join(owner_client.get(reverse("api-inference-job-csv", args=[job.pk])).streaming_content)
    header, *boxes = lines.decode().splitlines()
    assert header == "path,label,score,x1,y1,x2,y2" and len(boxes) == max(1, len(row["boxes"]))


@pytest.mark.parametrize(
    ("map_50", "drawn", "instances", "said"),
    [
        (0.0, 0, 4, "no box scored 0.3 or more on these images: the detector has not learned to find anything yet"),
        (0.0, 7, 4, "none of its 7 boxes scored 0.3 or more matches an object: the detector has not learned these"),
        (0.0002, 7, 4, None),  # it found something: the numbers say how much
        (0.0, 0, 0, None),  # nothing to find: COCO's -1, shown as 0, is not a detector's failure
    ],
)
def test_it_says_when_a_tested_detector_found_nothing(map_50, drawn, instances, said):
    import torch

    from workbench.inference.evaluation import _nothing_found_note

    notes = _nothing_found_note({"map_50": torch.tensor(map_50)}, drawn=drawn, instances=instances)
    assert notes[0].startswith(said) if said else notes == [], notes


def test_it_exports_a_segmentation_network_to_onnx_that_agrees_with_pytorch(owner):
    run = task_run(owner, "segmentation", SHAPES, test_images=3)
    path = exports.export_zip(run=run, fmt="onnx", checkpoint="best")
    with zipfile.ZipFile(path) as archive:
        names = {name.split("/", 1)[1] for name in archive.namelist()}
        meta = json.loads(archive.read(f"run{run.pk}-onnx/export.json"))
    assert {"model.onnx", "model.safetensors", "labels.txt", "README.txt"} <= names
    check = meta["dataset_check"]  # on the dataset's own images (its only split here: test)
    assert check["images"] == 3 and check["same_classes"] == 1.0 and check["max_abs_diff"] < 1e-3
    assert check["checked"] is True and check["compared"] > 0  # pixels (trainer.export.judged)
