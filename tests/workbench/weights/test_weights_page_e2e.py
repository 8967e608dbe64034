"""The Weights page in Chromium at 1280 px: what is filed comes first, the catalogue of what the
libraries publish (over a hundred rows with timm) is folded and in pages, and no page of it is
wider than the screen."""

from __future__ import annotations

import pytest

from tests.conftest import log_in

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCREEN = {"width": 1280, "height": 800}
SIZE = "() => ({width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight})"


def test_it_fits_1280_px_with_filed_weights_first_and_the_catalogue_folded(live_server_url, page, staff_user,
                                                                          lab_weights):  # fmt: skip
    page.set_viewport_size(SCREEN)
    log_in(page, live_server_url, staff_user.username)
    # The server's first look at the catalogue imports torchvision and timm: seconds on a loaded machine.
    page.goto(f"{live_server_url}/weights/", timeout=90_000)

    assert page.locator("#filed tr[data-present='1'] code").first.inner_text() == lab_weights.reference
    assert page.locator("#not-filed").is_hidden()  # folded: the page is its filed weights
    size = page.evaluate(SIZE)
    assert size["width"] <= SCREEN["width"] and size["height"] < 2 * SCREEN["height"], size

    page.locator("#catalogue summary").click()
    pages = 0
    while True:  # every page of the catalogue, timm's 60-character cache folders included
        pages += 1
        size = page.evaluate(SIZE)
        assert size["width"] <= SCREEN["width"], (page.url, size)
        assert "nan%" not in page.locator("#catalogue").inner_text()
        following = page.locator("#catalogue a[rel='next']")
        if not following.count():
            break
        following.click()
        page.wait_for_load_state()
        assert page.locator("#not-filed").is_visible()  # a page of the catalogue opens folded out
    assert pages > 1

    page.fill("#catalogue-q", "vgg16 features")
    page.locator(".catalogue-filter button").click()
    page.wait_for_load_state()
    assert page.locator("#not-filed tbody tr").count() == 1
    assert page.locator("#not-filed tbody tr td").nth(2).inner_text() == "not published"
