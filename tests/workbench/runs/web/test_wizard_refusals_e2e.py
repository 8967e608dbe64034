"""The new-run page in Chromium: a run the server refuses says why, beside the field it concerns
(and in the list at the top), and the live previews that follow do not wipe the reason away."""

from __future__ import annotations

import pytest

from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from tests.support.trainer_data import make_dataset_folder
from workbench.runs.models import Run
from workbench.workers.simulation import simulate_hosts

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REFUSAL = "63 is not divisible by the 2 processes"


@pytest.fixture
def digits(owner):
    dataset = make_dataset_row(
        owner,
        name="digits",
        image_width=8,
        image_height=8,
        channels=1,
        labels=["0", "1", "2"],
        splits={"train": {"count": 240}, "val": {"count": 60}},
    )
    make_dataset_folder(dataset.path)
    return dataset


def test_it_shows_why_the_run_was_refused_beside_its_field(live_server_url, page, owner, digits):
    simulate_hosts(hosts=1, gpus_per_host=2, prefix="refusal")
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/new/?dataset={digits.pk}")
    page.check("input[name=device_mode][value=count]")
    page.fill("#id_gpu_count", "2")
    with page.expect_response(lambda r: "/runs/new/lr-preview/" in r.url):
        page.fill("#id_batch_size", "63")
    with page.expect_response(lambda r: "/runs/new/lr-preview/" in r.url) as preview:
        page.click("#create-run")
    # The page that says no has drawn its learning-rate preview (which checks less) by now.
    assert preview.value.ok
    page.wait_for_function("document.querySelector('#lr-chart .main-svg') !== null")

    assert not Run.objects.exists()
    summary = page.locator("#form-errors")
    assert REFUSAL in summary.inner_text()
    assert summary.locator("a[href='#errors-batch_size']").inner_text() == "Batch size"
    beside = page.locator("#errors-batch_size")
    assert REFUSAL in beside.inner_text()
    assert beside.is_visible()
    assert "has-error" in page.locator(".field[data-field=batch_size]").get_attribute("class")

    # Edited, the field is judged again by the live checks: the old reason goes.
    page.fill("#id_batch_size", "64")
    page.wait_for_function("document.getElementById('errors-batch_size').textContent.trim() === ''")
    page.click("#create-run")
    page.wait_for_url(lambda url: "/runs/new/" not in url)
    assert Run.objects.get().config["batch_size"] == 64
