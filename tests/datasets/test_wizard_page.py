"""The wizard's page as the server renders it: every field's error shown where the field is, the
resize modes each task takes read from the validator, and a refused form keeping its upload."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest
from django.conf import settings

from datasets.forms import DatasetForm
from datasets.uploads import upload_save
from datasets.validators import resize_modes_by_task, resize_modes_for
from tests.support.shapes import make_shapes, write_kitti

TEMPLATE = Path(settings.BASE_DIR) / "templates" / "datasets" / "dataset_new.html"


def _upload(owner, archive: Path) -> str:
    class Uploaded:
        name = archive.name

        def chunks(self):
            yield archive.read_bytes()

    token, _ = upload_save(user_id=owner.pk, uploaded_file=Uploaded())
    return token


def _kitti_zip(tmp_path: Path) -> Path:
    folder = write_kitti(tmp_path / "street", make_shapes(4))
    archive = tmp_path / "street.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.rglob("*")):
            zf.write(path, path.relative_to(folder.parent))
    return archive


def test_it_prints_every_field_s_error_on_the_wizard_page():
    # channels and resize_mode had none: a refusal of either reopened the first step in silence.
    template = TEMPLATE.read_text()
    missing = [name for name in DatasetForm.base_fields if f"form.{name}.errors" not in template]
    assert missing == []


def test_it_takes_squash_and_fill_for_boxes_and_masks_and_every_mode_for_a_classifier():
    assert resize_modes_for("detection") == resize_modes_for("segmentation") == ("squash", "fill")
    assert resize_modes_for("classification") == ("squash", "crop", "fill", "half_crop")


@pytest.mark.django_db
def test_it_offers_the_validator_s_resize_modes_on_the_page(owner_client):
    html = owner_client.get("/datasets/new/").content.decode()
    data = re.search(r'<script id="resize-modes" type="application/json">(.*?)</script>', html).group(1)
    assert json.loads(data) == resize_modes_by_task()


@pytest.mark.django_db
def test_it_names_a_refused_resize_mode_on_the_options_step_and_keeps_the_upload(owner, owner_client, tmp_path):
    token = _upload(owner, _kitti_zip(tmp_path))
    fields = {"name": "street", "upload": token, "image_width": 16, "image_height": 16, "resize_mode": "crop"}
    response = owner_client.post("/datasets/new/", fields)
    html = response.content.decode()
    assert response.status_code == 400
    options = html.split('data-step="options"', 1)[1].split('data-step="preview"', 1)[0]
    assert "crop would cut objects out of the image; detection takes squash or fill" in options
    assert f'value="{token}"' in html and "Uploaded street.zip (kept" in html


@pytest.mark.django_db
def test_it_previews_only_the_modes_the_source_s_task_takes(owner_client, import_root):
    root = write_kitti(import_root / "street", make_shapes(4))
    fields = {"source_path": str(root), "image_width": 16, "image_height": 16}
    body = owner_client.post("/datasets/new/preview/", fields).json()
    assert body["task"] == "detection"
    assert body["resize_modes"] == list(body["modes"]) == ["squash", "fill"]


@pytest.mark.django_db
def test_it_says_the_task_when_the_preview_refuses_its_resize_mode(owner_client, import_root):
    root = write_kitti(import_root / "street", make_shapes(4))
    fields = {"source_path": str(root), "image_width": 16, "image_height": 16, "resize_mode": "half_crop"}
    response = owner_client.post("/datasets/new/preview/", fields)
    assert response.status_code == 400
    assert response.json()["task"] == "detection" and response.json()["resize_modes"] == ["squash", "fill"]
