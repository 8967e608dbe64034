"""Classify one image in Chromium: the answer about a corrupt image does not sit above the
previous image and its result, which would read as that image's."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from tests.conftest import log_in
from tests.workbench.inference.conftest import val_images

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_it_clears_the_previous_result_when_an_image_is_refused(live_server_url, page, owner, digits_run, tmp_path):
    (image,), _ = val_images(digits_run, count=1)
    good = tmp_path / "digit.png"
    buffer = io.BytesIO()
    Image.fromarray(image, mode="L").save(buffer, format="PNG")
    good.write_bytes(buffer.getvalue())
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n" + b"broken" * 20)

    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{digits_run.pk}/classify/")
    page.set_input_files("#classify-file", str(good))
    page.wait_for_selector("#classify-chart .main-svg")
    assert page.is_visible("#classify-result")

    page.set_input_files("#classify-file", str(corrupt))
    page.wait_for_function("document.getElementById('classify-error').textContent !== ''")
    assert "corrupt.png" in page.inner_text("#classify-error")
    assert page.is_hidden("#classify-result")  # digit.png's picture and bars are gone with it
