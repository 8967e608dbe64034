"""The new-run page in Chromium: networks that cannot take the dataset's images cannot be chosen
(their reason stands in their row), and the custom network's layer editor fits its card."""

from __future__ import annotations

import pytest

from datasets.models import Dataset
from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from tests.support.trainer_data import make_dataset_folder
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def make_digits(owner, *, side: int) -> Dataset:
    dataset = make_dataset_row(
        owner, name="digits", image_width=side, image_height=side, channels=1,
        labels=["0", "1", "2"], splits={"train": {"count": 240}, "val": {"count": 60}},
    )  # fmt: skip
    make_dataset_folder(dataset.path)
    return dataset


def open_new_run(page, base_url: str, dataset: Dataset) -> None:
    """Opens the page and waits for every network's fit: the zoo's answers come in chunks after
    the classic networks' and move the rows as they fill them in (a click between two of them
    missed its radio button)."""
    page.goto(f"{base_url}/runs/new/?dataset={dataset.pk}")
    page.wait_for_selector("#network-table[data-fits=done]", state="attached", timeout=90_000)
    assert page.locator("#network-vit_b_16").is_disabled()


def test_it_disables_networks_that_cannot_take_the_datasets_images(live_server_url, page, owner):
    dataset = make_digits(owner, side=8)
    log_in(page, live_server_url, owner.username)
    open_new_run(page, live_server_url, dataset)
    for name, reason in (("alexnet", "needs images of at least 63x63"), ("vit_b_16", "multiple of 16")):
        assert page.is_disabled(f"#network-{name}")
        row = page.locator(f"tr[data-network={name}]")
        assert reason in row.locator(".network-fit").inner_text()  # said in the row, not only on hover
        assert reason in row.get_attribute("title")
    assert page.is_enabled("#network-lenet") and page.is_enabled("#network-resnet18")
    assert page.inner_text("tr[data-network=resnet18] .network-fit") == "takes these 8×8 images; designed for 224×224"
    assert page.is_enabled("#network-custom")
    page.click("tr[data-network=alexnet] td.network-description")  # a click on the row chooses nothing
    assert not page.is_checked("#network-alexnet")


def test_it_unchooses_a_network_that_no_longer_fits_and_says_why(live_server_url, page, owner):
    dataset = make_digits(owner, side=32)
    log_in(page, live_server_url, owner.username)
    with page.expect_response(lambda r: "/runs/new/networks/" in r.url, timeout=60_000):
        page.goto(f"{live_server_url}/runs/new/?dataset={dataset.pk}")
    page.wait_for_function("!document.querySelector('#network-vgg16').disabled")
    page.check("#network-vgg16")
    with page.expect_response(lambda r: "/runs/new/networks/" in r.url and "crop_size=16" in r.url):
        page.fill("#id_crop_size", "16")
    page.wait_for_function("document.querySelector('#network-vgg16').disabled")
    assert not page.is_checked("#network-vgg16")
    assert "vgg16 cannot take this dataset's images" in page.inner_text("#errors-network")


ROW_TOPS = """() => Object.fromEntries([...document.querySelectorAll('#network-table tbody tr:not([hidden])')]
  .map((row) => [row.dataset.network, Math.round(row.getBoundingClientRect().top)]))"""


def test_it_keeps_every_row_in_place_while_the_fits_come_in(live_server_url, page, owner):
    dataset = make_digits(owner, side=8)
    log_in(page, live_server_url, owner.username)
    held = []  # the fits' requests, answered only after the rows' places before any answer are read

    def hold(route) -> None:
        if before is None:
            held.append(route)
        else:
            route.continue_()

    before = None
    page.route("**/runs/new/networks/**", hold)
    page.goto(f"{live_server_url}/runs/new/?dataset={dataset.pk}")
    page.wait_for_function("document.querySelector('#network-table').dataset.fits === 'checking'")
    # Playwright serves the routes only while it is called: wait in the page, not in time.sleep.
    wait_until(
        lambda: held,
        what="the page to ask for the networks' fits",
        timeout=60,
        interval=0.05,
        sleep=lambda seconds: page.wait_for_timeout(seconds * 1000),
    )
    before = page.evaluate(ROW_TOPS)
    for route in held:
        route.continue_()
    page.wait_for_selector("#network-table[data-fits=done]", state="attached", timeout=90_000)
    assert page.locator("#network-alexnet").is_disabled()  # the answers did fill the rows in
    after = page.evaluate(ROW_TOPS)
    moved = {name: (top, after.get(name)) for name, top in before.items() if after.get(name) != top}
    assert not moved, moved


LONGEST_FITS = """() => [...document.querySelectorAll('#layer-table select, #new-layer-type')].map((select) => {
  const probe = document.createElement('span');
  probe.style.font = getComputedStyle(select).font;
  probe.style.position = 'absolute';
  probe.textContent = 'adaptive_avg_pool';
  document.body.append(probe);
  const needed = probe.getBoundingClientRect().width;
  probe.remove();
  return select.getBoundingClientRect().width >= needed + 16;  // the text and the arrow
})"""


MENU_AND_BUTTON = """() => ['new-layer-type', 'add-layer'].map((id) => {
  const box = document.getElementById(id).getBoundingClientRect();
  return {x: box.x, y: box.y, height: box.height};
})"""


def test_it_shows_the_custom_layer_menus_whole(live_server_url, page, owner):
    dataset = make_digits(owner, side=8)
    log_in(page, live_server_url, owner.username)
    open_new_run(page, live_server_url, dataset)
    page.check("#network-custom")
    page.wait_for_function("document.querySelectorAll('#layer-table select').length === 8")
    fits = page.evaluate(LONGEST_FITS)
    assert len(fits) == 9 and all(fits), fits
    # The menu to add a layer sits beside its button, not across the card above it. Both boxes are
    # read in one script: read one at a time, a layout shift between the reads moved one (CI saw 88 px).
    menu, button = page.evaluate(MENU_AND_BUTTON)
    assert abs(menu["y"] - button["y"]) < button["height"] and menu["x"] < button["x"], (menu, button)


def test_it_states_limits_as_plain_numbers(live_server_url, page, owner):
    dataset = make_digits(owner, side=8)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/runs/new/?dataset={dataset.pk}")
    page.fill("#id_batch_size", "2000000")
    page.click("#create-run")
    beside = page.locator("#errors-batch_size")
    beside.wait_for(state="visible")
    assert "2000000 must be between 1 and 1048576" in beside.inner_text()
    assert "e+" not in page.inner_text("#form-errors")


def test_it_opens_without_a_script_error_for_a_user_with_no_ready_dataset(live_server_url, page, other_user):
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, live_server_url, other_user.username)
    page.goto(f"{live_server_url}/runs/new/")
    page.wait_for_load_state("networkidle")
    assert "There is no ready dataset yet" in page.inner_text("main")
    assert errors == []


def test_it_opens_a_detection_dataset_valid_and_offers_its_tasks_fields_only(live_server_url, page, owner):
    digits = make_digits(owner, side=32)  # 240 training images
    boxes = make_dataset_row(
        owner, name="boxes", task="detection", image_width=160, image_height=120, labels=["car", "dog"],
        splits={"train": {"count": 52}, "val": {"count": 13}},
    )  # fmt: skip
    log_in(page, live_server_url, owner.username)
    with page.expect_response(lambda r: "/runs/new/lr-preview/" in r.url, timeout=60_000) as answer:
        page.goto(f"{live_server_url}/runs/new/?dataset={boxes.pk}")
    assert answer.value.ok  # the learning-rate preview takes the batch: the form opens valid
    assert page.input_value("#id_batch_size") == "32"  # not 64 against 52 training images
    assert page.input_value("#id_best_metric") == "map"
    assert page.locator("#id_best_metric option[value=top1]").is_disabled()
    for name in ("crop_size", "mean_subtraction", "vertical_flip", "random_resized_crop", "preset"):
        assert page.locator(f'.field[data-field="{name}"]').is_hidden(), name
    assert page.inner_text("#errors-batch_size").strip() == ""
    page.select_option("#id_dataset", str(digits.pk))  # a classifier's dataset: its own defaults and fields
    assert page.input_value("#id_batch_size") == "64" and page.input_value("#id_best_metric") == "top1"
    assert page.locator('.field[data-field="mean_subtraction"]').is_visible()
    page.fill("#id_batch_size", "24")  # a batch the person chose stays theirs
    page.select_option("#id_dataset", str(boxes.pk))
    assert page.input_value("#id_batch_size") == "24" and page.input_value("#id_best_metric") == "map"
