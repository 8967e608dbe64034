"""The wizard's preview step shows the four resize modes side by side on the user's own image,
and the one chosen by looking is the one the build will use."""

from __future__ import annotations

import pytest

from tests.conftest import log_in
from tests.datasets.conftest import make_class_folders, zip_folder

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.slow]


def test_it_shows_every_resize_mode_on_the_user_s_image_and_uses_the_one_picked(live_server_url, page, owner, tmp_path):
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    folder = make_class_folders(tmp_path / "fruit", {"apple": 3, "kiwi": 3}, size=(40, 20))
    archive = zip_folder(folder, tmp_path / "fruit.zip")
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/new/")
    page.set_input_files("#archive-file", str(archive))
    page.wait_for_selector("text=Uploaded fruit.zip")
    page.click("#wizard-next")
    page.fill("[name=image_width]", "16")
    page.fill("[name=image_height]", "16")
    page.click("#wizard-next")

    page.wait_for_selector("#preview-modes figure img[src^='data:image/png']")
    modes = page.eval_on_selector_all("#preview-modes figure", "els => els.map((el) => el.dataset.mode)")
    assert modes == ["squash", "crop", "fill", "half_crop"]
    page.wait_for_function("[...document.querySelectorAll('#preview-modes img')].every((i) => i.naturalWidth === 16)")
    # A 40x20 image into 16x16: fill and half crop pad with noise, squash and crop do not (the
    # test images are of one colour, so squash and crop look alike).
    sources = page.eval_on_selector_all("#preview-modes img", "els => els.map((el) => el.src)")
    assert len(set(sources)) == 3 and sources[0] == sources[1]
    assert "chosen" in page.get_attribute("#preview-modes figure[data-mode=squash]", "class")

    page.click("#preview-modes figure[data-mode=half_crop] button")
    assert page.input_value("[name=resize_mode]") == "half_crop"
    assert "chosen" in page.get_attribute("#preview-modes figure[data-mode=half_crop]", "class")
    assert page.get_attribute("#preview-resized", "src") == sources[3]
    page.click("#wizard-next")
    assert "half" in page.inner_text("#summary").lower()
    assert errors == []
