"""DIGITS's "Top N per category" on a test of a split: the N images the model is most sure belong
to each class, in a grid on the job page (Chromium), beside a confusion matrix whose empty cells
say nothing."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import log_in
from workbench.inference import engine


def test_it_picks_the_most_confident_images_of_each_class(tmp_path):
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]])
    seen = np.zeros((4, 1, 4, 4), dtype=np.uint8)
    top = engine.save_top_per_class(np.array([0, 1, 1, 1]), probs, seen, ["a", "b"], tmp_path, n=2)
    assert [image["name"] for image in top[0]["images"]] == ["#0", "#2"]
    assert [image["true"] for image in top[0]["images"]] == ["a", "b"]  # #2 is really a "b"
    assert [image["probability"] for image in top[1]["images"]] == [0.8, 0.7]
    assert sorted(p.name for p in (tmp_path / "top").iterdir()) == ["0_0.png", "0_1.png", "1_0.png", "1_1.png"]


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_shows_the_top_images_per_class_of_a_tested_split(celery_worker, live_server_url, page, owner, digits_run):
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/{digits_run.pk}/test/")
    page.select_option("#test-form select[name=source]", "val")
    page.click("#test-form button[type=submit]")
    page.wait_for_url("**/jobs/**")
    page.locator("#top-per-class-card").wait_for(state="visible", timeout=120_000)

    rows = page.locator("#top-per-class .top-class")
    assert rows.count() == 10 and page.locator("#top-n").inner_text() == "8"
    assert rows.nth(3).locator("h3").inner_text() == "3"
    assert rows.nth(3).locator("figure").count() == 8
    page.wait_for_function(
        "[...document.querySelectorAll('#top-per-class img')].every((img) => img.complete && img.naturalWidth === 8)"
    )
    first = rows.nth(3).locator("figcaption").first.inner_text()
    assert first.endswith("%") and float(first.rstrip("%")) > 50

    # The confusion matrix: numbers in the cells that have images, nothing in the empty ones.
    texts = "[...document.querySelectorAll('#confusion .heatmaplayer text')].map((t) => t.textContent)"
    page.wait_for_function(f"{texts}.length > 0")
    cells = page.evaluate(texts)
    assert any(text.endswith("%)") for text in cells)
    assert not any(text.startswith("0 (") for text in cells)
    assert errors == []
