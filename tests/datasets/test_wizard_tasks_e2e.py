"""The wizard in a real browser, as a new user met it (issue 33): a detection source is offered only
the resize modes its task takes, its class table is confirmed in words, and Next on the options
step waits for the size proposed from the images instead of carrying 256x256 on."""

from __future__ import annotations

import pytest

from tests.conftest import log_in
from tests.datasets.conftest import make_class_folders
from tests.support.shapes import make_shapes, write_kitti

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.slow]

OFFERED = "els => els.filter((el) => !el.disabled && !el.hidden).map((el) => el.value)"


def _server_source(page, live_server_url, owner, path) -> None:
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/new/")
    page.check("input[name=source_choice][value=server]")
    page.fill("[name=source_path]", str(path))


def test_it_offers_a_detection_source_only_squash_and_fill_and_confirms_its_class_table_in_words(
    live_server_url, page, owner, import_root
):
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    street = write_kitti(import_root / "street", make_shapes(6))
    first, second = sorted((street / "labels").glob("*.txt"))[:2]
    first.unlink()  # an image without labels
    second.write_text(second.read_text().replace("square ", "van ", 1))  # one van: "1 object"
    _server_source(page, live_server_url, owner, street)
    page.click("#wizard-next")
    page.wait_for_selector("[data-step=options].current")
    page.wait_for_function("document.querySelector('[name=resize_mode] option[value=crop]').disabled")
    assert page.eval_on_selector_all("[name=resize_mode] option", OFFERED) == ["squash", "fill"]
    assert "detection takes squash or fill" in page.inner_text("#resize-mode-note")
    page.click("#wizard-next")

    page.wait_for_selector("#preview-modes figure img[src^='data:image/png']")
    assert page.eval_on_selector_all("#preview-modes figure", "els => els.map((el) => el.dataset.mode)") == [
        "squash",
        "fill",
    ]
    # Every image counted once: 6 in all, 5 labelled (it said "6 images with kitti labels, 1 without").
    assert page.inner_text("#label-check-summary").startswith("6 images for detection: 5 with kitti labels, 1 without.")
    assert "van (1 object)" in page.inner_text("#class-table-result")
    page.fill("tr[data-source-class=disc] input[type=text]", "ball")
    page.press("tr[data-source-class=disc] input[type=text]", "Tab")
    page.wait_for_selector("#class-table-result:has-text('ball (')")
    page.click("#wizard-next")
    summary = page.inner_text("#summary")
    assert "disc → ball" in summary and "{" not in summary  # words, not the class table's JSON
    assert errors == []


def test_it_waits_for_the_proposed_size_when_next_is_clicked_before_it_arrives(
    live_server_url, page, owner, import_root
):
    previews, held = [], []  # the first preview checks the source; the second proposes the size

    def hold_the_proposal(route) -> None:
        previews.append(route.request.post_data or "")
        if len(previews) == 2:
            held.append(route)
        else:
            route.continue_()

    page.route("**/datasets/new/preview/", hold_the_proposal)
    _server_source(
        page, live_server_url, owner, make_class_folders(import_root / "wide", {"a": 3, "b": 3}, size=(40, 20))
    )
    page.click("#wizard-next")
    for _ in range(1200):  # Playwright serves the routes only while it is called: wait in the page
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "the wizard never asked for its proposal"
    page.click("#wizard-next")  # before the proposal arrives
    page.wait_for_timeout(200)
    assert page.get_attribute(".step.current", "data-step") == "options" and len(previews) == 2
    held[0].continue_()
    page.wait_for_selector("#preview-resized[src^='data:image/png']")
    assert page.input_value("[name=image_width]") == "40" and page.input_value("[name=image_height]") == "20"
    assert "40×20" in page.inner_text("#preview-resized-caption")
    assert 'name="image_width"\r\n\r\n40' in previews[-1]  # the preview asked for the proposed size


def test_it_says_a_voc_source_is_split_by_its_own_lists(live_server_url, page, owner, import_root):
    from tests.datasets.labels.test_splits import SHAPES, write_voc_masks_with_lists

    _server_source(page, live_server_url, owner, write_voc_masks_with_lists(import_root / "voc", SHAPES))
    page.click("#wizard-next")
    page.wait_for_selector("[data-step=options].current")
    page.click("#wizard-next")
    page.wait_for_selector("#label-check-summary:has-text('own lists')")
    summary = page.inner_text("#label-check-summary")
    assert "ImageSets/Segmentation/train.txt, ImageSets/Segmentation/val.txt): train 5, val 4" in summary
    assert "3 unlisted" in page.inner_text("#label-check-problems")
