"""Dataset versions in a real browser: the leak report's one click makes version 2 without the
training split's copy, the run page names the version a run trained on and retrains it on the
new one, and the compare page shows both runs."""

from __future__ import annotations

import numpy as np
import pytest

from datasets.services import duplicates_check_now
from tests.conftest import log_in
from tests.datasets.doctor.conftest import SIDE, distinct_images, mirrored_jpeg
from tests.support.factories import make_dataset_row
from tests.support.trainer_data import write_dataset_folder
from workbench.runs.models import Run
from workbench.runs.services import run_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.slow]


def test_it_drops_the_leaked_copy_into_a_version_and_retrains_a_run_on_it(live_server_url, page, owner):
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    train, val = distinct_images(20, seed=1), distinct_images(6, seed=2)
    val.append(mirrored_jpeg(train[4]))
    dataset = make_dataset_row(owner, name="leaky", image_width=SIDE, image_height=SIDE, channels=1,
                               labels=["a", "b"], splits={"train": {"count": 20}, "val": {"count": 7}})  # fmt: skip
    as_split = lambda images: (np.stack(images)[..., None], np.arange(len(images)) % 2)  # noqa: E731
    write_dataset_folder(dataset.path, {"train": as_split(train), "val": as_split(val)}, ["a", "b"])
    duplicates_check_now(dataset=dataset, by=owner)
    run = run_create(owner=owner, dataset=dataset, name="first", network="lenet",
                     config={"batch_size": 4, "epochs": 1}, device_request={"kind": "cpu"})  # fmt: skip
    Run.objects.filter(pk=run.pk).update(state=Run.State.DONE)  # trained: only its page matters here

    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/{dataset.pk}/")
    assert page.inner_text("#duplicates-leaks") == "1 across splits"
    page.click("#drop-leaks")
    page.wait_for_selector("#versions-table tr[data-version='2']")
    assert "Version 2 made: dropped 1 training copies of validation and test images" in page.inner_text("main")
    row = page.inner_text("#versions-table tr[data-version='2']")
    assert "latest" in row and "train 19" in row and "val 7" in row

    page.goto(f"{live_server_url}/runs/{run.pk}/")
    assert page.inner_text("#run-dataset-version") == f"v1 {run.dataset_version.short_digest}"
    page.click("#run-retrain")
    page.wait_for_url("**/runs/compare/?runs=*")
    again = Run.objects.exclude(pk=run.pk).get()
    assert again.dataset_version.number == 2 and again.name == "first (v2)"
    page.wait_for_function("document.querySelector('#compare-state').textContent.startsWith('2 runs')")
    for pk in (run.pk, again.pk):  # both ticked: the original and the retrain, side by side
        assert page.is_checked(f"input[name='runs'][value='{pk}']")
    assert errors == []
