"""A label check in a real browser: started from the dataset page, its fold runs trained by a real
worker, its suspects fixed with the keyboard alone into a new version of the dataset."""

from __future__ import annotations

import time

import pytest

from datasets.models import DatasetVersion
from tests.conftest import log_in
from tests.workbench.labelchecks.conftest import FLIPPED

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.slow]


def test_it_checks_the_labels_and_fixes_the_suspects_with_the_keyboard(
    live_server_url, page, celery_worker, owner, noisy
):
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/{noisy.pk}/")
    form = page.locator("#label-check form")
    form.locator("input[name=folds]").fill("3")
    form.locator("input[name=epochs]").fill("20")
    form.locator("input[name=batch_size]").fill("8")
    form.locator("input[name=gpus]").fill("cpu")
    page.click("#label-check-start")
    page.wait_for_url("**/label-checks/*/")
    assert page.locator("#label-check-folds tbody tr").count() == 3
    deadline = time.monotonic() + 150
    while not page.locator("#suspects").count():  # the page follows the folds when read
        assert time.monotonic() < deadline, page.inner_text("main")
        page.wait_for_timeout(2000)
        page.reload()
    assert page.inner_text("#label-check-summary").startswith("60 images checked: 3 suspect labels")

    page.keyboard.press("j")  # the first image
    page.keyboard.press("a")  # its suggestion, then the next
    page.keyboard.press("d")  # dropped
    page.keyboard.press("2")  # class_2
    assert page.inner_text("#suspects-count") == "2 to relabel, 1 to drop, 0 kept."
    page.click("#accept-suspects")
    page.wait_for_url(f"**/datasets/{noisy.pk}/")
    assert "Version 2 made: label check" in page.inner_text("main")
    version = DatasetVersion.objects.get(dataset=noisy, number=2)
    assert [fix["op"] for fix in version.fixes] == ["relabel", "drop", "relabel"]
    assert version.fixes[2]["label"] == 2 and {fix["index"] for fix in version.fixes} == set(FLIPPED)
    assert errors == []
