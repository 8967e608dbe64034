"""Detect and segment one image through the API (issue 22): boxes in the image's own pixels, a
mask of its size with a legend; a run of one task refuses another task's action by name.

The checkpoints are the real networks' untrained weights, written as the trainer writes them
(the trainer's own tests train them: tests/trainer/test_tasks.py)."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from tests.workbench.inference.conftest import task_run

pytestmark = pytest.mark.django_db


def png(width: int, height: int) -> io.BytesIO:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 40, 40)).save(buffer, format="PNG")
    buffer.seek(0)
    buffer.name = "scene.png"
    return buffer


def test_it_detects_boxes_in_the_images_own_pixels_and_refuses_to_classify(owner_client, owner):
    run = task_run(owner, "detection", ["square", "disc"])
    answer = owner_client.post(f"/api/runs/{run.pk}/detect/", {"image": png(160, 120), "min_score": "0"})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["width"], body["height"], body["labels"]) == (160, 120, ["square", "disc"])
    assert all(0 <= b["box"][0] <= b["box"][2] <= 160 and 0 <= b["box"][3] <= 120 for b in body["boxes"])
    assert [b["score"] for b in body["boxes"]] == sorted((b["score"] for b in body["boxes"]), reverse=True)
    refused = owner_client.post(f"/api/runs/{run.pk}/classify/", {"image": png(32, 32)})
    assert refused.status_code == 400
    assert refused.json() == {
        "run": [f"run #{run.pk}: this run's model does not classify: it is a detector; use detect"]
    }
    bad = owner_client.post(f"/api/runs/{run.pk}/detect/", {"image": png(32, 32), "min_score": "2"})
    assert bad.status_code == 400 and "min_score" in bad.json()


def test_it_segments_an_image_at_its_own_size_with_a_legend(owner_client, owner, other_user, client):
    run = task_run(owner, "segmentation", ["background", "square", "disc"])
    answer = owner_client.post(f"/api/runs/{run.pk}/segment/", {"image": png(100, 70)})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    mask = Image.open(io.BytesIO(base64.b64decode(body["mask"].split(",", 1)[1])))
    assert mask.size == (100, 70) and mask.mode == "L"
    assert set(mask.tobytes()) == {c["index"] for c in body["classes"]}
    assert abs(sum(c["share"] for c in body["classes"]) - 1) < 1e-6
    assert all(c["label"] in ("background", "square", "disc") and c["color"].startswith("#") for c in body["classes"])
    client.force_login(other_user)
    assert client.post(f"/api/runs/{run.pk}/segment/", {"image": png(10, 10)}).status_code == 404


def test_it_says_before_building_what_a_detector_cannot_export_or_be_asked(owner_client, owner):
    run = task_run(owner, "detection", ["square", "disc"], network="ssdlite320_mobilenet_v3_large")
    page = owner_client.get(f"/runs/{run.pk}/export/").content.decode()
    assert '<option value="onnx" disabled>' in page and "Not available for ssdlite320_mobilenet_v3_large" in page
    assert '<option value="torchscript">' in page
    answer = owner_client.get(f"/api/runs/{run.pk}/download/", {"format": "onnx"})
    assert answer.status_code == 400 and "cannot export it" in answer.json()["format"][0]
    assert not (run.run_dir / "exports").exists()  # refused before anything was queued or built
    upload = owner_client.post(f"/api/runs/{run.pk}/test/", {"source": "upload", "images": png(40, 40)})
    assert upload.json() == {
        "source": ["a detection run is tested on its dataset's validation or test split, not on uploaded images"]
    }
    detect_page = owner_client.get(f"/runs/{run.pk}/detect/").content.decode()
    assert "Detect all" in detect_page and 'name="source"' not in detect_page  # uploaded images only
    many = owner_client.post(f"/api/runs/{run.pk}/classify-many/", {"images": png(40, 40)})
    assert many.json() == {"run": [f"run #{run.pk} is a detection run: it does not classify; use detect"]}
