"""Detect's one image in Chromium at 1,920 px (issue 33): a 160x120 image stood at 240x180, 1.5
times (uneven pixels), in a page 1,150 px wide, its labels grown with it and piled up. Now the
page is the screen's width, the image a whole multiple of its pixels as large as its card allows,
and the labels 12 px on screen whatever the zoom, in black or white on their class's colour, whole
inside the image. The detector's answer is the page's to draw:
it is given here, as the API answers (the API's own tests run the network)."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from tests.conftest import log_in
from tests.workbench.inference.conftest import task_run
from workbench.inference.evaluation import BOX_COLOURS, _luminance

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ANSWER = {
    "width": 160, "height": 120, "labels": ["car", "dog"], "checkpoint": "best checkpoint",
    "boxes": [{"label": "car", "score": 0.9, "box": [10, 10, 60, 50]},
              {"label": "dog", "score": 0.8, "box": [12, 14, 70, 60]}],
}  # fmt: skip
SHOWN = """() => {
  const image = document.getElementById('detect-image').getBoundingClientRect();
  const label = document.querySelector('#detect-boxes text').getBoundingClientRect();
  return {width: image.width, height: image.height, label: label.height,
          main: document.querySelector('main').getBoundingClientRect().width};
}"""


def drop_image(page, base_url: str, owner, run, action: str, answer: dict) -> None:
    """Opens the run's `action` page at 1,920 px and gives it a 160x120 image, `answer` as the API's."""
    page.set_viewport_size({"width": 1920, "height": 1000})
    log_in(page, base_url, owner.username)
    page.goto(f"{base_url}/runs/{run.pk}/{action}/")
    api = page.get_attribute(f"#{action}-one", "data-api")
    page.route(f"**{api}", lambda route: route.fulfill(json=answer))
    buffer = io.BytesIO()
    Image.new("RGB", (160, 120), (90, 120, 200)).save(buffer, format="PNG")
    page.set_input_files(f"#{action}-file", files=[{"name": "street.png", "mimeType": "image/png",
                                                    "buffer": buffer.getvalue()}])  # fmt: skip


def test_it_draws_a_small_image_at_a_whole_zoom_with_labels_of_one_size(live_server_url, page, owner):
    run = task_run(owner, "detection", ["car", "dog"])
    drop_image(page, live_server_url, owner, run, "detect", ANSWER)
    page.wait_for_selector("#detect-boxes text")
    shown = page.evaluate(SHOWN)
    assert shown["main"] > 1800, shown  # the screen's width, not 1,150 px of it
    assert (shown["width"], shown["height"]) == (640, 480), shown  # 4 times, not 1.5
    assert shown["label"] < 20, shown  # 12 px text, not 12 image pixels times the zoom


EDGES = {
    **ANSWER,
    "boxes": [{"label": "car", "score": 0.9, "box": [130, 0, 160, 30]},  # the top right corner
              {"label": "dog", "score": 0.8, "box": [0, 100, 40, 120]}],  # the bottom left
}  # fmt: skip
LABELS = """() => {
  const image = document.getElementById('detect-image').getBoundingClientRect();
  return [...document.querySelectorAll('#detect-boxes g.label')].map((label) => {
    const chip = label.querySelector('rect').getBoundingClientRect();
    const text = label.querySelector('text').getBoundingClientRect();
    return {inside: [chip, text].every((r) => r.left >= image.left - 0.5 && r.right <= image.right + 0.5
                                              && r.top >= image.top - 0.5 && r.bottom <= image.bottom + 0.5),
            chip: label.querySelector('rect').getAttribute('fill'),
            ink: label.querySelector('text').getAttribute('fill'),
            last: !label.nextElementSibling || label.nextElementSibling.matches('g.label')};
  });
}"""


def test_it_writes_each_label_whole_in_black_or_white_on_its_classs_colour(live_server_url, page, owner):
    run = task_run(owner, "detection", ["car", "dog"])
    drop_image(page, live_server_url, owner, run, "detect", EDGES)
    page.wait_for_selector("#detect-boxes text")
    labels = page.evaluate(LABELS)
    assert len(labels) == 2, labels
    for label in labels:
        assert label["inside"], labels  # a label at the right edge was cut off there
        assert label["last"], labels  # over every box's line
        assert label["chip"] in BOX_COLOURS, labels  # the one palette
        lighter, darker = sorted((_luminance(label["chip"]), _luminance(label["ink"])), reverse=True)
        assert (lighter + 0.05) / (darker + 0.05) >= 4.5, labels


def png_url(image: Image.Image) -> str:
    import base64

    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def test_it_draws_a_small_image_to_segment_at_a_whole_zoom_under_its_classes(live_server_url, page, owner):
    run = task_run(owner, "segmentation", ["background", "road"])
    answer = {
        "colors": png_url(Image.new("RGBA", (160, 120), (255, 0, 0, 255))), "mask": png_url(Image.new("L", (160, 120))),
        "classes": [{"index": 0, "label": "background", "color": "#000000", "share": 1.0}],
        "width": 160, "height": 120, "checkpoint": "best checkpoint",
    }  # fmt: skip
    drop_image(page, live_server_url, owner, run, "segment", answer)
    page.wait_for_function("document.getElementById('segment-image').style.width !== ''")
    image = page.locator("#segment-image").bounding_box()
    overlay = page.locator("#segment-overlay").bounding_box()
    assert (image["width"], image["height"]) == (640, 480) and overlay == image
