"""End to end in a real browser: a KITTI zip through the wizard with the task chosen, the class
table shown with its counts before anything is built, a class ignored, the real worker's build,
and the dataset page's label check and gallery."""

from __future__ import annotations

import json
import re

import pytest

from datasets.models import Dataset
from tests.conftest import log_in
from tests.datasets.conftest import zip_folder
from tests.support import shapes as drawn

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_it_imports_a_kitti_zip_with_a_class_ignored_in_the_class_table(
    live_server_url, celery_worker, page, owner, tmp_path
):
    folder = drawn.write_kitti(tmp_path / "streets", drawn.make_shapes(6))
    (folder / "labels" / "orphan.txt").write_text("square 0 0 0 1 1 5 5 1 1 1 0 0 0 0\n")
    archive = zip_folder(folder, tmp_path / "streets.zip")
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/new/")
    page.set_input_files("#archive-file", str(archive))
    page.wait_for_selector("text=Uploaded streets.zip")
    page.select_option("[name=task]", "detection")
    page.click("#wizard-next")
    page.wait_for_selector("#wizard-back", state="visible")
    page.fill("[name=image_width]", "24")
    page.fill("[name=image_height]", "18")
    page.click("#wizard-next")

    page.wait_for_selector("#label-check-box", state="visible")
    assert "6 images with kitti labels for detection" in page.inner_text("#label-check-summary")
    rows = page.inner_text("#class-table-editor tbody")
    assert re.search(r"disc\s+3", rows) and re.search(r"square\s+6", rows)
    assert "labels/orphan.txt: no image orphan.* in images/" in page.inner_text("#label-check-problems")
    page.check("[aria-label='Ignore disc']")
    page.wait_for_function("document.querySelector('#id_class_map').value.includes('disc')")
    assert json.loads(page.input_value("#id_class_map")) == {"disc": None}
    page.click("#wizard-next")
    assert '{"disc":null}' in page.inner_text("#summary")
    page.click("#create-dataset")

    page.wait_for_url(re.compile(r"/datasets/\d+/$"))
    page.wait_for_selector("#label-check", timeout=60_000)
    dataset = Dataset.objects.get()
    assert (dataset.task, dataset.labels) == ("detection", ["square"])
    assert "Detection, kitti labels" in page.inner_text("#dataset-task")
    assert "ignored" in page.inner_text("#class-map-table")
    # Plotly drew the label statistics: box sizes and aspect, objects per image, centres' heat map.
    for chart in ("#stats-box-width", "#stats-box-aspect", "#stats-objects", "#stats-centres"):
        page.wait_for_selector(f"{chart} .main-svg")
    page.wait_for_selector("#gallery img")
    assert "square" in page.inner_text("#gallery")
