"""Detection end to end on the real worker (issue 22): a KITTI folder imported through the real
build, a detector queued through the API on two simulated GPUs (DDP with gloo), its mAP and its
losses by part stored as the run's series, and the trained model detecting an uploaded image.
One test for the path; the trainer's own tests cover segmentation and the tasks in detail."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.urls import reverse
from PIL import Image

from datasets.models import Dataset
from tests.datasets.conftest import IMPORT_ROOT
from tests.support import shapes as drawn
from tests.workbench.runs.test_worker_runs import wait_for_state
from workbench.runs.models import Run

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def test_it_trains_a_detector_from_a_kitti_import_on_two_simulated_gpus_and_detects(
    celery_worker, transactional_db, owner, owner_client, settings, tmp_path
):
    settings.IMPORT_ROOTS = [IMPORT_ROOT]
    source = drawn.write_kitti(IMPORT_ROOT / tmp_path.name, drawn.make_shapes(16, size=(64, 48)))
    out = io.StringIO()
    call_command("import_dataset", str(source), "--task", "detection", "--image-size", "64x64", "--channels", "3",
                 "--owner", owner.username, "--sync", stdout=out, stderr=io.StringIO())  # fmt: skip
    dataset = Dataset.objects.get(pk=int(out.getvalue().splitlines()[0]))
    assert (dataset.status, dataset.task, dataset.source["format"]) == ("ready", "detection", "kitti")

    body = {"dataset": dataset.pk, "network": "fasterrcnn_mobilenet_v3_large_320_fpn", "epochs": 1, "batch_size": 4,
            "gpus": "2", "config": {"metrics_interval": 1, "data": {"num_workers": 0}}}  # fmt: skip
    answer = owner_client.post(reverse("api-runs"), body, content_type="application/json")
    assert answer.status_code == 201, answer.json()
    run = wait_for_state(Run.objects.get(pk=answer.json()["id"]), Run.State.DONE, Run.State.FAILED, timeout=600)
    assert run.state == Run.State.DONE, run.error
    validation = run.events.filter(kind="validation").last().data
    assert 0 <= validation["map"] <= 1 and "map_50" in validation
    assert "loss_box_reg" in run.events.filter(kind="metrics").last().data

    image = io.BytesIO()
    Image.new("RGB", (96, 72), (40, 40, 40)).save(image, format="PNG")
    image.seek(0)
    image.name = "scene.png"
    detected = owner_client.post(f"/api/runs/{run.pk}/detect/", {"image": image, "min_score": "0"})
    assert detected.status_code == 200, detected.content
    assert detected.json()["labels"] == dataset.labels
