"""Lists of runs in Chromium: a long run name stays on one line, cut with an ellipsis and whole in
its title; the runs list says what its loss and headline metric figures are, in words on the page."""

from __future__ import annotations

import pytest

from datasets.models import Dataset
from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from workbench.runs.services import run_create

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LONG = "resnet18 on the handwritten digits, lr 0.05 with cosine decay, batch 128, 2 simulated GPUs, second try"
ONE_LINE = """(el) => {
  const lineHeight = parseFloat(getComputedStyle(el).lineHeight) || 1.4 * parseFloat(getComputedStyle(el).fontSize);
  return {height: el.getBoundingClientRect().height, lineHeight, cut: el.scrollWidth > el.clientWidth,
          overflow: getComputedStyle(el).textOverflow, title: el.title, text: el.textContent.trim()};
}"""


def assert_one_line(locator, expected_text: str) -> None:
    shown = locator.evaluate(ONE_LINE)
    assert shown["height"] < 1.5 * shown["lineHeight"], shown
    assert shown["cut"] and shown["overflow"] == "ellipsis", shown
    assert shown["title"] == LONG and shown["text"] == expected_text


def test_it_keeps_long_run_names_on_one_line_with_the_whole_name_in_the_title(live_server_url, page, owner):
    dataset = make_dataset_row(owner, name="digits", status=Dataset.Status.BUILDING)  # unschedulable
    run = run_create(owner=owner, dataset=dataset, name=LONG, network="lenet", config={},
                     device_request={"kind": "cpu"})  # fmt: skip
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/")
    assert_one_line(page.locator(f"#run-{run.pk} a[href='/runs/{run.pk}/']"), LONG)
    page.goto(f"{live_server_url}/")
    assert_one_line(page.locator(f"tr[data-run-id='{run.pk}'] .long-name"), LONG)
    page.goto(f"{live_server_url}/runs/queue/")
    assert_one_line(page.locator(".long-name").first, LONG)
    page.goto(f"{live_server_url}/datasets/{dataset.pk}/")
    assert_one_line(page.locator("#dataset-runs .long-name"), f"#{run.pk} {LONG}")


def test_it_says_what_the_loss_and_headline_metric_columns_are(live_server_url, page, owner):
    dataset = make_dataset_row(owner, name="digits", status=Dataset.Status.BUILDING)
    run_create(owner=owner, dataset=dataset, name="r", network="lenet", config={}, device_request={"kind": "cpu"})
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/")
    headers = page.locator("#run-table thead th")
    loss = headers.filter(has_text="Loss").first
    headline = headers.filter(has_text="Headline metric").first
    assert loss.locator(".column-hint").is_visible() and headline.locator(".column-hint").is_visible()
    assert "last train / best val" in loss.inner_text()
    assert "last / best val: top-1, mAP or mIoU" in headline.inner_text()


def test_it_fits_the_runs_list_in_1280_px_for_staff_with_a_detectors_long_network_name(
    live_server_url, page, staff_user
):
    # Loss curve, Created and Actions stood off to the side, behind the table's scroll bar.
    dataset = make_dataset_row(staff_user, name="street boxes", task="detection", status=Dataset.Status.BUILDING)
    run_create(owner=staff_user, dataset=dataset, name="boxes", network="fasterrcnn_mobilenet_v3_large_320_fpn",
               config={}, device_request={"kind": "cpu"})  # fmt: skip
    page.set_viewport_size({"width": 1280, "height": 900})
    log_in(page, live_server_url, staff_user.username)
    page.goto(f"{live_server_url}/runs/")
    assert page.locator("#run-table thead th").filter(has_text="Owner").count() == 1  # staff see the owners
    overflow = page.evaluate(
        "() => { const s = document.querySelector('.table-scroll'); return s.scrollWidth - s.clientWidth; }"
    )
    assert overflow <= 1, overflow
