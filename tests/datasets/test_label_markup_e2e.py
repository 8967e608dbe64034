"""In a real browser: class names that are markup reach Plotly as text (static/workbench/plotly_text.js).
Plotly draws a subset of HTML in labels: a class folder named <a href=...> was a live link on the
histogram's axis, and a <span style="font-size:300px"> drew over the chart."""

from __future__ import annotations

import pytest

from tests.conftest import log_in
from tests.support.factories import make_dataset_row

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LINK = "<a href='https://evil.example/'>link</a>"
HUGE = '<span style="font-size:300px">big</span>'


def test_it_draws_markup_class_names_as_text_on_the_histogram(live_server_url, page, owner):
    dataset = make_dataset_row(
        owner, name="markup", image_width=8, image_height=8, channels=1,
        labels=[LINK, HUGE, "plain"], splits={"train": {"count": 6, "class_counts": [2, 2, 2]}},
    )  # fmt: skip
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/{dataset.pk}/")
    page.wait_for_selector("#histogram .main-svg")
    ticks = page.eval_on_selector_all("#histogram .xtick text", "els => els.map((e) => e.textContent)")
    assert ticks == [LINK, HUGE, "plain"]  # written out as typed
    assert page.locator("#histogram a").count() == 0  # no link on the axis
    sizes = page.eval_on_selector_all(
        "#histogram .xtick tspan, #histogram .xtick text", "els => els.map((e) => getComputedStyle(e).fontSize)"
    )
    assert all(size != "300px" for size in sizes), sizes
