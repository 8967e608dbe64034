"""The wizard proposes the options that keep the user's images as they are: for 32x32 grey
digits, 32x32 and one channel instead of the 256x256 colour defaults (192 times larger)."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from PIL import Image

from tests.conftest import log_in


def png(size, mode: str, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    shape = (size[1], size[0]) if mode == "L" else (size[1], size[0], 3)
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, shape, dtype=np.uint8), mode=mode).save(buffer, format="PNG")
    return buffer.getvalue()


def digits_zip(path, *, odd_one=True):
    with zipfile.ZipFile(path, "w") as archive:
        for label in ("3", "7"):
            for i in range(4):
                archive.writestr(f"digits/{label}/{i}.png", png((32, 32), "L", i))
        if odd_one:
            archive.writestr("digits/7/odd.png", png((28, 28), "L", 9))
    return path


def upload(owner, archive) -> str:
    from datasets.uploads import upload_save

    class Uploaded:
        name = archive.name

        def chunks(self):
            yield archive.read_bytes()

    return upload_save(user_id=owner.pk, uploaded_file=Uploaded())[0]


@pytest.mark.django_db
def test_it_proposes_the_common_size_and_channels_of_the_images(owner_client, owner, tmp_path):
    token = upload(owner, digits_zip(tmp_path / "digits.zip"))
    body = owner_client.post("/datasets/new/preview/", {"upload": token}).json()
    assert body["proposed"] == {"width": 32, "height": 32, "channels": 1, "sampled": 9, "same_size": 8}


@pytest.mark.django_db
def test_it_proposes_colour_when_any_image_has_colour(owner_client, owner, tmp_path):
    archive = digits_zip(tmp_path / "mixed.zip", odd_one=False)
    with zipfile.ZipFile(archive, "a") as zf:
        zf.writestr("digits/3/colour.png", png((32, 32), "RGB", 1))
    body = owner_client.post("/datasets/new/preview/", {"upload": upload(owner, archive)}).json()
    assert body["proposed"]["channels"] == 3 and body["proposed"]["width"] == 32


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_fills_the_options_step_from_the_archive(live_server_url, page, owner, tmp_path):
    archive = digits_zip(tmp_path / "digits.zip")
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/datasets/new/")
    page.set_input_files("#archive-file", str(archive))
    page.wait_for_selector("text=Uploaded digits.zip")
    page.click("#wizard-next")
    page.wait_for_selector("#options-proposal:not([hidden])")
    assert "32×32, grey" in page.inner_text("#options-proposal")
    assert page.input_value("[name=image_width]") == "32" and page.input_value("[name=image_height]") == "32"
    assert page.input_value("[name=channels]") == "1"
    page.click("#wizard-next")
    page.wait_for_selector("#preview-resized[src^='data:image/png']")
    assert page.eval_on_selector("#preview-resized", "el => el.naturalWidth") == 32

    # Options the user set are theirs: going back does not propose over them.
    page.click("#wizard-back")
    page.fill("[name=image_width]", "64")
    previews = []
    page.on("request", lambda request: previews.append(request) if "/datasets/new/preview/" in request.url else None)
    page.click("#wizard-back")
    page.click("#wizard-next")  # the options step again: no proposal is asked for
    page.click("#wizard-next")
    page.wait_for_function("document.querySelector('#preview-resized').naturalWidth === 64")
    # One request checks the source on leaving its step, one draws the preview: none proposes.
    assert page.input_value("[name=image_width]") == "64" and len(previews) == 2
