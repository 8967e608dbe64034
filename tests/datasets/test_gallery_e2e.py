"""The dataset page's gallery in a real browser: a thumbnail opens its image at the size it is
stored at (issue 33: thumbnails were not clickable, and 96 pixels showed little of a 128 one)."""

from __future__ import annotations

import pytest

from datasets import building, services
from tests.conftest import log_in
from tests.datasets.conftest import make_class_folders

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.slow]


def test_it_opens_a_thumbnail_at_its_stored_size_and_closes_it(live_server_url, page, owner, import_root):
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    root = make_class_folders(import_root / "fruit", {"apple": 2, "kiwi": 2}, size=(40, 20))
    options = {"image_width": 128, "image_height": 128, "val_percent": 0}
    dataset = services.dataset_create(
        owner=owner, name="fruit", kind="folder", source={"path": str(root)}, options=options, queue=False
    )
    building.dataset_build(dataset_id=dataset.pk)
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/{dataset.pk}/")
    page.wait_for_selector("#gallery button.thumb img")
    assert page.eval_on_selector("#gallery img", "el => el.naturalWidth") == 96  # the thumbnail

    page.click("#gallery button.thumb")
    page.wait_for_selector("#gallery-viewer[open] #gallery-viewer-image[src^='data:image/png']")
    assert page.eval_on_selector("#gallery-viewer-image", "el => el.naturalWidth") == 128
    assert "128×128, as stored" in page.inner_text("#gallery-viewer-caption")
    page.click("#gallery-viewer-close")
    assert not page.is_visible("#gallery-viewer")
    assert errors == []
