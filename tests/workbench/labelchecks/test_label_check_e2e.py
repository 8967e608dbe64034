"""A label check in a real browser: started from the dataset page, its fold runs trained by a real
worker, its suspects fixed with the keyboard alone into a new version of the dataset."""

from __future__ import annotations

import pytest

from datasets.models import DatasetVersion
from tests.conftest import log_in
from tests.support.waiting import wait_for_state
from tests.workbench.labelchecks.conftest import FLIPPED
from workbench.labelchecks.models import LabelCheck

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
    form.locator("input[name=epochs]").fill("40")
    form.locator("input[name=batch_size]").fill("8")
    form.locator("input[name=gpus]").fill("cpu")
    page.click("#label-check-start")
    page.wait_for_url("**/label-checks/*/")
    assert page.locator("#label-check-folds tbody tr").count() == 3
    # Nobody reads the check meanwhile: its last fold's end brings it up to date (receivers.py).
    check = LabelCheck.objects.get()
    wait_for_state(check, LabelCheck.State.DONE, LabelCheck.State.FAILED, timeout=150)
    assert check.state == LabelCheck.State.DONE, check.error
    page.reload()
    suspects = page.locator("#suspects .suspect").count()
    assert suspects >= 2 and page.inner_text("#label-check-summary").startswith(
        f"60 images checked: {suspects} suspect"
    )

    page.keyboard.press("j")  # the first image
    page.keyboard.press("2")  # class_2, then the next
    page.keyboard.press("d")  # dropped
    assert page.inner_text("#suspects-count") == f"1 to relabel, 1 to drop, {suspects - 2} kept."
    page.click("#accept-suspects")
    page.wait_for_url(f"**/datasets/{noisy.pk}/")
    assert "Version 2 made: label check" in page.inner_text("main")
    version = DatasetVersion.objects.get(dataset=noisy, number=2)
    assert [fix["op"] for fix in version.fixes] == ["relabel", "drop"] and version.fixes[0]["label"] == 2
    assert {fix["index"] for fix in version.fixes} <= set(FLIPPED)  # the labels the bench flipped
    assert errors == []
