"""Detect and segment one image in Chromium (issue 22): boxes drawn on the image with class and
score, hidden by the score slider and the class filter without asking the server again; the
segmentation overlay's opacity, its legend, and the class under the pointer."""

from __future__ import annotations

import pytest
from PIL import Image

from tests.conftest import log_in
from tests.workbench.inference.conftest import task_run

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BOXES = "document.querySelectorAll('#detect-boxes g.box').length"


def test_it_draws_boxes_the_slider_and_the_class_filter_hide(live_server_url, page, owner, tmp_path):
    run = task_run(owner, "detection", ["square", "disc"])
    picture = tmp_path / "scene.png"
    Image.new("RGB", (96, 64), (200, 40, 40)).save(picture)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    page.click("nav.run-links >> text=Detect")  # where a classifier's run page links "Classify"
    page.set_input_files("#detect-file", str(picture))
    page.wait_for_selector("#detect-result:not([hidden])")
    page.fill("#detect-threshold", "0.05")
    page.dispatch_event("#detect-threshold", "input")
    everything = page.evaluate(BOXES)
    assert everything > 0 and page.locator("#detect-table tbody tr").count() == everything
    scores = page.evaluate("[...document.querySelectorAll('#detect-boxes text')].map((t) => t.textContent)")
    assert all(text.split()[0] in ("square", "disc") and text.endswith("%") for text in scores)
    assert page.get_attribute("#detect-boxes", "viewBox") == "0 0 96 64"  # boxes in the image's own pixels
    page.fill("#detect-threshold", "1")
    page.dispatch_event("#detect-threshold", "input")
    assert page.evaluate(BOXES) == 0 and "0 of" in page.inner_text("#detect-summary")
    page.fill("#detect-threshold", "0.05")
    page.dispatch_event("#detect-threshold", "input")
    page.uncheck("#detect-classes input[value=disc]")
    labels = page.evaluate("[...document.querySelectorAll('#detect-boxes text')].map((t) => t.textContent)")
    assert all(text.startswith("square") for text in labels) and len(labels) < everything


def test_it_overlays_the_classes_and_names_the_one_under_the_pointer(live_server_url, page, owner, tmp_path):
    run = task_run(owner, "segmentation", ["background", "square", "disc"])
    picture = tmp_path / "scene.png"
    Image.new("RGB", (80, 60), (30, 30, 30)).save(picture)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{run.pk}/segment/")
    page.set_input_files("#segment-file", str(picture))
    page.wait_for_selector("#segment-result:not([hidden])")
    legend = page.locator("#segment-legend li").all_inner_texts()
    assert legend and all(text.split()[0] in ("background", "square", "disc") for text in legend)
    page.fill("#segment-opacity", "0.2")
    page.dispatch_event("#segment-opacity", "input")
    assert page.evaluate("getComputedStyle(document.getElementById('segment-overlay')).opacity") == "0.2"
    page.wait_for_function("document.getElementById('dropzone').textContent.startsWith('scene.png')")
    page.hover("#segment-stage img#segment-image", position={"x": 5, "y": 5})
    named = page.inner_text("#segment-hover")
    assert named.startswith("(") and named.split(": ")[1] in [text.split()[0] for text in legend]
