"""Home in Chromium at 1280 px: each card's table fits its card, the Created column whole
(issue 33: the runs card cut it, its table scrolling sideways)."""

from __future__ import annotations

import pytest

from datasets.models import Dataset
from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from workbench.runs.services import run_create

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FITS = """(card) => {
  const scroll = card.querySelector('.table-scroll');
  const created = [...card.querySelectorAll('th')].find((th) => th.textContent.trim() === 'Created');
  return {overflow: scroll.scrollWidth - scroll.clientWidth,
          createdRight: created.getBoundingClientRect().right, cardRight: scroll.getBoundingClientRect().right};
}"""


def test_it_fits_the_created_column_of_each_card_at_1280_px(live_server_url, page, owner):
    dataset = make_dataset_row(
        owner, name="handwritten digits from the scanner, second batch", status=Dataset.Status.BUILDING,
        image_width=28, image_height=28,
    )  # fmt: skip
    run_create(owner=owner, dataset=dataset, name="resnet18 on the handwritten digits, lr 0.05 with cosine decay",
               network="mobilenet_v3_large", config={}, device_request={"kind": "cpu"})  # fmt: skip
    page.set_viewport_size({"width": 1280, "height": 800})
    log_in(page, live_server_url, owner.username)
    shown = {card: page.locator(card).evaluate(FITS) for card in ("#home-datasets", "#home-runs")}
    page.set_viewport_size({"width": 1700, "height": 800})  # side by side: still whole
    shown |= {f"{card} at 1700": page.locator(card).evaluate(FITS) for card in ("#home-datasets", "#home-runs")}
    cut = {card: s for card, s in shown.items() if s["overflow"] > 0 or s["createdRight"] > s["cardRight"] + 0.5}
    assert not cut, cut
