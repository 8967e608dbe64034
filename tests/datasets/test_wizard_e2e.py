"""End to end in a real browser: upload a zip in the wizard (progress bar), preview, confirm,
watch the real worker build it, then see counts, histogram, mean and gallery."""

from __future__ import annotations

import re
import threading

import pytest

from tests.conftest import log_in
from tests.datasets.conftest import make_class_folders, zip_folder
from tests.support.factories import make_dataset_row
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_it_imports_an_uploaded_zip_through_the_wizard(live_server_url, celery_worker, page, owner, tmp_path):
    folder = make_class_folders(tmp_path / "fruit", {"apple": 4, "kiwi": 6}, size=(40, 20))
    archive = zip_folder(folder, tmp_path / "fruit.zip")
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/new/")

    page.set_input_files("#archive-file", str(archive))
    page.wait_for_selector("text=Uploaded fruit.zip")
    assert page.eval_on_selector("#upload-progress", "el => el.value") == 100
    assert page.is_visible("#wizard-next") and not page.is_visible("#wizard-back")  # nothing before step 1
    page.click("#wizard-next")
    page.wait_for_selector("#wizard-back", state="visible")  # once the source is checked

    page.fill("[name=image_width]", "16")
    page.fill("[name=image_height]", "16")
    page.select_option("[name=resize_mode]", "fill")
    page.fill("[name=val_percent]", "50")
    page.click("#wizard-next")

    page.wait_for_selector("#preview-resized[src^='data:image/png']")
    assert "40×20" in page.inner_text("#preview-original-caption")
    assert page.eval_on_selector("#preview-resized", "el => el.naturalWidth") == 16
    page.click("#wizard-next")

    assert page.input_value("[name=name]") == "fruit"
    assert "16 × 16" in page.inner_text("#summary")
    page.click("#create-dataset")

    page.wait_for_url(re.compile(r"/datasets/\d+/$"))
    # The page follows the build over its websocket and reloads when the build is done.
    page.wait_for_selector("#class-table", timeout=60_000)
    assert page.inner_text("#split-counts") == "train 5 · val 5"
    rows = page.inner_text("#class-table tbody")
    assert "apple" in rows and "kiwi" in rows
    page.wait_for_selector("#histogram .main-svg")  # Plotly drew the bar chart
    assert page.eval_on_selector("#mean-image", "el => el.naturalWidth") == 16
    page.wait_for_selector("#gallery img")
    assert page.locator("#gallery img").count() == 5
    # Page 1 of 1: no pager buttons that look pressable; the next step is at the top of the page.
    assert "page 1 of 1" in page.inner_text("#gallery-page")
    assert not page.is_visible("#gallery-prev") and not page.is_visible("#gallery-next")
    assert page.is_visible("#new-run")
    page.select_option("#gallery-label", label="kiwi")
    page.wait_for_function("document.querySelector('#gallery-page').textContent.includes('(3 images)')")
    page.select_option("#gallery-split", "val")
    page.wait_for_function("document.querySelector('#gallery-page').textContent.includes('(3 images)')")


def test_it_shows_the_refusal_of_an_oversized_upload(live_server_url, page, owner, tmp_path):
    big = tmp_path / "huge.zip"
    with open(big, "wb") as fh:
        fh.truncate(64 * 1024 * 1024 * 1024)  # sparse: 64 GiB on paper, over the 20 GiB default limit
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/new/")
    page.set_input_files("#archive-file", str(big))
    page.wait_for_selector("text=over the upload limit")


def test_it_imports_a_digits_job_folder_from_a_server_path(live_server_url, celery_worker, page, owner, import_root):
    import numpy as np

    from tests.support.trainer_data import write_dataset_folder

    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, (10, 8, 8, 3), dtype=np.uint8)
    splits = {"train": (images[:6], np.arange(6) % 2), "val": (images[6:], np.arange(4) % 2)}
    folder = write_dataset_folder(import_root / "digits_job", splits, ["ant", "bee"], digits_layout=True)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/new/")
    page.check("input[name=source_choice][value=server]")
    page.fill("[name=source_path]", str(folder))
    page.click("#wizard-next")
    page.click("#wizard-next")
    page.wait_for_selector("#preview-resized[src^='data:image/png']")
    assert "stored size" in page.inner_text("#preview-resized-caption")
    page.click("#wizard-next")
    assert page.input_value("[name=name]") == "digits_job"
    page.click("#create-dataset")
    page.wait_for_selector("#class-table", timeout=60_000)
    assert page.inner_text("#split-counts") == "train 6 · val 4"
    assert "DIGITS dataset job folder" in page.inner_text(".facts")
    page.wait_for_selector("#gallery img")
    assert page.locator("#gallery img").count() == 6


def test_it_imports_sklearn_digits_from_a_server_folder(live_server_url, celery_worker, page, owner, import_root):
    from tests.datasets.conftest import sklearn_digits_folders

    root = sklearn_digits_folders(import_root / "digits", per_class=10)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/new/")
    page.check("input[name=source_choice][value=server]")
    page.fill("[name=source_path]", str(root))
    page.click("#wizard-next")
    page.fill("[name=image_width]", "8")
    page.fill("[name=image_height]", "8")
    page.select_option("[name=channels]", "1")
    page.click("#wizard-next")
    page.wait_for_selector("#preview-resized[src^='data:image/png']")
    page.click("#wizard-next")
    page.click("#create-dataset")
    page.wait_for_selector("#class-table", timeout=60_000)
    assert page.inner_text("#split-counts") == "train 80 · val 20"
    assert page.locator("#class-table tbody tr").count() == 10
    page.wait_for_selector("#histogram .main-svg")
    assert page.eval_on_selector("#mean-image", "el => el.naturalWidth") == 8
    page.wait_for_selector("#gallery img")
    page.select_option("#gallery-label", label="7")
    page.wait_for_function("document.querySelector('#gallery-page').textContent.includes('(8 images)')")


def test_it_imports_a_text_list_from_server_paths(live_server_url, celery_worker, page, owner, import_root):
    images = make_class_folders(import_root / "img", {"left": 3, "right": 3}, size=(12, 12))
    (import_root / "labels.txt").write_text("left\nright\n")
    lines = [f"{name}/img_{i}.png {label}" for label, name in enumerate(("left", "right")) for i in range(3)]
    (import_root / "train.txt").write_text("\n".join(lines) + "\nbroken line\n")
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/new/")
    page.check("input[name=source_choice][value=server]")
    page.fill("[name=source_path]", str(import_root / "train.txt"))
    page.fill("[name=labels_path]", str(import_root / "labels.txt"))
    page.fill("[name=image_folder]", str(images))
    page.click("#wizard-next")
    page.fill("[name=val_percent]", "0")
    page.click("#wizard-next")
    page.wait_for_selector("#preview-resized[src^='data:image/png']")
    page.click("#wizard-next")
    page.click("#create-dataset")
    page.wait_for_selector("#class-table", timeout=60_000)
    assert page.inner_text("#split-counts") == "train 6"
    assert "Text list" in page.inner_text(".facts")
    assert "train.txt line 7\tlabel 'line' is not an integer" in page.inner_text("#skipped-table")


def test_it_follows_a_build_over_its_websocket_without_polling(live_server_url, page, owner):
    # No worker: the test plays the build, publishing progress as the build task does.
    from datasets.events import publish
    from datasets.models import Dataset

    dataset = make_dataset_row(owner, name="growing", status=Dataset.Status.BUILDING)
    api_calls = []
    page.on("request", lambda request: "/api/datasets/" in request.url and api_calls.append(request.url))
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/{dataset.pk}/")

    def progress_shown(done: int) -> None:
        # Published again until the page shows it: the socket may still be connecting.
        def shown() -> bool:
            # From another thread: Playwright's loop owns this one, and async_to_sync refuses it.
            publisher = threading.Thread(target=publish, args=(dataset,))
            publisher.start()
            publisher.join()
            return page.inner_text("#progress-done") == str(done)

        wait_until(shown, what=f"the page to show {done} images done", timeout=30, interval=0.5)

    Dataset.objects.filter(pk=dataset.pk).update(progress_done=37, progress_total=100, images_per_second=12.5)
    dataset.refresh_from_db()
    progress_shown(37)
    assert page.inner_text("#progress-total") == "100" and page.inner_text("#progress-rate") == "12.5"
    assert page.get_attribute("#progress-bar", "style") == "width: 37%;"
    assert api_calls == []  # the page never polled the REST API


def test_it_never_writes_a_proposed_size_into_the_field_the_user_is_typing_in(
    live_server_url, celery_worker, page, owner, import_root
):
    # The proposal used to land between the select-all and the typed text: "8" typed over a
    # proposed "8" read 88, and the dataset was built 88 pixels wide.
    from tests.datasets.conftest import sklearn_digits_folders

    root = sklearn_digits_folders(import_root / "digits", per_class=2)
    log_in(page, live_server_url, owner.username)
    previews, held = [], []  # the first preview checks the source; the second proposes the size

    def hold_the_proposal(route) -> None:
        previews.append(route.request.url)
        if len(previews) == 2:
            held.append(route)
        else:
            route.continue_()

    page.route("**/datasets/new/preview/", hold_the_proposal)
    page.goto(f"{live_server_url}/datasets/new/")
    page.check("input[name=source_choice][value=server]")
    page.fill("[name=source_path]", str(root))
    page.click("#wizard-next")
    # Playwright serves the routes only while it is called: wait in the page, not in time.sleep.
    wait_until(
        lambda: held,
        what="the wizard to ask for its second proposal",
        timeout=60,
        interval=0.05,
        sleep=lambda seconds: page.wait_for_timeout(seconds * 1000),
    )
    page.focus("[name=image_width]")
    page.keyboard.press("Control+A")
    held[0].continue_()
    page.wait_for_selector("#dataset-wizard[data-proposal=waiting]", state="attached")
    page.keyboard.type("12")
    page.keyboard.press("Tab")
    assert page.input_value("[name=image_width]") == "12"
    assert page.get_attribute("#dataset-wizard", "data-proposal") == "dropped"  # the user chose their own size
