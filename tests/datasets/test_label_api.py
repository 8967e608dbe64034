"""The REST API of detection and segmentation datasets: the label check before the build (a
server folder or an uploaded zip), create with a task and format, and the stored label check
and statistics on GET."""

from __future__ import annotations

import pytest

from datasets import building
from datasets.models import Dataset
from tests.datasets.conftest import zip_folder
from tests.support import shapes as drawn

SHAPES = drawn.make_shapes(6)


@pytest.mark.django_db
def test_it_checks_a_folder_and_an_uploaded_zip_before_anything_is_built(owner_client, import_root):
    source = drawn.write_kitti(import_root / "kitti", SHAPES)
    (source / "labels" / f"{SHAPES[0].name}.txt").write_text("square 0 0 0 1 2\n")
    response = owner_client.post(
        "/api/datasets/label-check/",
        {"source_path": str(source), "class_map": {"disc": None}},
        content_type="application/json",
    )
    assert response.status_code == 200, response.json()
    check = response.json()
    assert (check["task"], check["format"], check["images"], check["count_unit"]) == (
        "detection",
        "kitti",
        6,
        "objects",
    )
    assert check["classes"] == [
        {"name": "disc", "count": 3, "maps_to": None},
        {"name": "square", "count": 5, "maps_to": "square"},
    ]
    assert check["report"]["problems"] == [
        {
            "file": f"labels/{SHAPES[0].name}.txt",
            "line": 1,
            "kind": "malformed",
            "message": "6 columns; a KITTI line has 15 (16 with a score)",
        }
    ]
    archive = zip_folder(drawn.write_voc(import_root / "voc", SHAPES), import_root / "voc.zip")
    token = owner_client.post("/api/datasets/uploads/", {"archive": archive.open("rb")}).json()["upload"]
    response = owner_client.post("/api/datasets/label-check/", {"upload": token}, content_type="application/json")
    assert response.status_code == 200, response.json()  # the task proposed from the zip's member names
    assert response.json()["format"] == "voc" and response.json()["labels"] == [
        {"name": "disc", "count": 3},
        {"name": "square", "count": 6},
    ]
    assert not list(building.datasets_root().glob(".label-check-*"))  # the extraction is gone


@pytest.mark.django_db
def test_it_creates_a_segmentation_dataset_and_answers_its_label_statistics(owner_client, import_root):
    source = drawn.write_voc_masks(import_root / "voc", SHAPES)
    response = owner_client.post(
        "/api/datasets/",
        {
            "name": "shapes",
            "source_path": str(source),
            "task": "segmentation",
            "format": "voc_masks",
            "class_map": {"disc": "shape", "square": "shape"},
            "image_width": 24,
            "image_height": 24,
            "resize_mode": "fill",
        },
        content_type="application/json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["task"] == "segmentation" and body["options"]["task"] == "segmentation"
    assert body["label_options"] == {
        "format": "voc_masks",
        "class_map": {"disc": "shape", "square": "shape"},
        "min_box_size": 0.0,
    }
    building.dataset_build(dataset_id=body["id"])
    dataset = Dataset.objects.get(pk=body["id"])
    assert dataset.status == "ready", dataset.error
    assert dataset.labels == ["background", "shape"]
    labels = owner_client.get(body["labels_url"]).json()
    assert labels["check"]["labels"] == [{"name": "background", "count": 6}, {"name": "shape", "count": 6}]
    areas = {row["name"]: row["pixels"] for row in labels["stats"]["class_areas"]}
    assert areas["background"] > areas["shape"] > 0
    assert sum(areas.values()) == 6 * 24 * 18  # 24x24 by fill: 3 rows above and below are ignore (255)
    page = owner_client.get(f"/datasets/{dataset.pk}/").content.decode()
    assert "<h2>Images holding each class</h2>" in page and "No label problems." in page
    assert "0 built without a class pixel." in page
    assert 'id="label-stats-data"' in page and 'id="stats-areas"' in page
    gallery = owner_client.get(f"/api/datasets/{dataset.pk}/gallery/", {"label": 1}).json()
    assert gallery["total"] == dataset.splits["train"]["count"]  # every image holds a shape
    assert all(item["classes"] == [0, 1] and item["src"] for item in gallery["items"])


@pytest.mark.django_db
def test_it_refuses_crop_an_lmdb_kind_and_a_bad_class_table_by_field(owner_client, import_root):
    source = drawn.write_yolo(import_root / "yolo", SHAPES)
    response = owner_client.post(
        "/api/datasets/",
        {"name": "x", "source_path": str(source), "resize_mode": "half_crop", "class_map": "{not json"},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["errors"]["class_map"] == [
        "the class table is not valid JSON (Expecting property name enclosed in double quotes at character 1)"
    ]
    response = owner_client.post(
        "/api/datasets/",
        {"name": "x", "source_path": str(source), "resize_mode": "half_crop"},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["errors"]["resize_mode"][0].startswith("half_crop would cut objects out of the image")
    response = owner_client.post(
        "/api/datasets/",
        {"name": "x", "source_path": str(source), "class_map": {"square": 3}},
        content_type="application/json",
    )
    assert response.json()["errors"]["class_map"] == ["square: the new name must be text, or null to ignore the class"]
    assert not Dataset.objects.exists()
