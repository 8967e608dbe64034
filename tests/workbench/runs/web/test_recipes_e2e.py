"""The new-run page's zoo and recipe in Chromium: the filter finds the zoo's networks by family, a
preset fills the fields (which stay editable), and the preview shows eight augmented copies."""

from __future__ import annotations

import pytest

from tests.conftest import log_in
from tests.workbench.runs.web.test_new_run_page_e2e import make_digits, open_new_run

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_it_finds_zoo_networks_fills_a_preset_and_previews_augmentations(live_server_url, page, owner):
    dataset = make_digits(owner, side=8)
    log_in(page, live_server_url, owner.username)
    open_new_run(page, live_server_url, dataset)
    page.fill("#network-filter", "timm convnext")
    shown = page.eval_on_selector_all(
        "#network-table tbody tr:not(.filtered-out):not([hidden])", "rows => rows.map(r => r.dataset.network)"
    )
    assert "timm/convnext_atto" in shown and "resnet18" not in shown
    page.select_option("#id_preset", "deit")
    assert page.input_value("#id_optimizer") == "adamw" and page.input_value("#id_mixup_alpha") == "0.8"
    assert "facebookresearch/deit" in page.inner_text("#preset-source")
    page.fill("#id_mixup_alpha", "0.4")  # editable after the preset filled it
    assert page.input_value("#id_mixup_alpha") == "0.4"
    page.click("#augment-preview-button")
    page.wait_for_function("document.querySelectorAll('#augment-preview img').length === 8", timeout=30_000)
    assert "8 copies at 8×8" in page.inner_text("#augment-preview-status")
