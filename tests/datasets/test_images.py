"""Per-image pipeline: identification by content, conversion rules, DIGITS resize modes."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from datasets.images import ImageRefused, load_image, prepare_image, resize_image, set_max_pixels, to_array


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def test_it_resizes_squash_to_exact_size_ignoring_aspect():
    array = np.zeros((375, 500, 3), np.uint8)
    assert resize_image(array, 256, 256, "squash").shape == (256, 256, 3)


def test_it_crops_the_centre_in_crop_mode():
    # Left third red, middle third green, right third blue: a centre crop of a wide image is green.
    array = np.zeros((100, 300, 3), np.uint8)
    array[:, :100, 0] = 255
    array[:, 100:200, 1] = 255
    array[:, 200:, 2] = 255
    out = resize_image(array, 50, 50, "crop")
    assert out.shape == (50, 50, 3)
    assert out[:, 5:45, 1].min() == 255 and out[:, 5:45, [0, 2]].max() == 0


def test_it_pads_with_noise_in_fill_mode():
    array = np.full((100, 200, 3), 255, np.uint8)  # wide and white
    out = resize_image(array, 100, 100, "fill", rng=np.random.default_rng(1))
    assert out.shape == (100, 100, 3)
    # The image is scaled to 100x50 and centred; 25 rows of noise above and below.
    assert out[25:75].min() == 255
    assert out[:25].std() > 20 and out[75:].std() > 20


def test_it_half_crops_half_fills():
    array = np.full((100, 400, 3), 255, np.uint8)  # ratio 4:1 into a square
    out = resize_image(array, 100, 100, "half_crop", rng=np.random.default_rng(2))
    assert out.shape == (100, 100, 3)
    # Scaled by the mean ratio (2.5): 160x40, cropped to 100 wide, 30 rows of noise each side.
    assert out[30:70].min() == 255
    assert out[:30].std() > 20


def test_it_converts_cmyk_16bit_palette_and_alpha_by_the_rules():
    cmyk = Image.new("CMYK", (4, 4), (0, 255, 255, 0))  # pure red in CMYK
    assert tuple(to_array(cmyk, 3)[0, 0]) == (255, 0, 0)
    gray16 = Image.fromarray(np.full((4, 4), 65535, np.uint16))
    assert to_array(load_image(_png(gray16)), 1)[0, 0, 0] == 255
    half16 = Image.fromarray(np.full((4, 4), 32896, np.uint16))  # 128 * 257
    assert to_array(load_image(_png(half16)), 1)[0, 0, 0] == 128
    palette = Image.new("P", (4, 4), 0)
    palette.putpalette([0, 0, 255] + [0] * 765)
    assert tuple(to_array(load_image(_png(palette)), 3)[0, 0]) == (0, 0, 255)
    rgba = Image.new("RGBA", (4, 4), (255, 255, 255, 0))  # fully transparent white -> black
    assert tuple(to_array(load_image(_png(rgba)), 3)[0, 0]) == (0, 0, 0)
    la = Image.new("LA", (4, 4), (200, 255))  # opaque gray stays gray
    assert to_array(load_image(_png(la)), 1)[0, 0, 0] == 200
    assert to_array(load_image(_png(Image.new("L", (4, 4), 90))), 3)[0, 0].tolist() == [90, 90, 90]


def test_it_refuses_a_decompression_bomb_at_the_warning_threshold():
    big = _png(Image.new("L", (200, 200), 0))
    set_max_pixels(100 * 100)  # 40,000 px is over the limit but under Pillow's own 2x error
    try:
        with pytest.raises(ImageRefused, match="decompression bomb"):
            load_image(big)
    finally:
        set_max_pixels(89_478_485)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty file"),
        (b"this is a text file named photo.jpg", "not an image"),
        (_png(Image.new("RGB", (64, 64), (1, 2, 3)))[:80], "truncated"),
    ],
    ids=["zero-byte", "text-named-jpg", "truncated-png"],
)
def test_it_refuses_broken_files_with_a_reason(data, message):
    with pytest.raises(ImageRefused, match=message):
        load_image(data)


def test_it_identifies_images_by_content_not_extension(tmp_path):
    path = tmp_path / "actually_a_png.jpg"
    Image.new("RGB", (5, 3), (9, 9, 9)).save(path, format="PNG")
    out = prepare_image(path, width=5, height=3, channels=3, resize_mode="squash")
    assert out.shape == (3, 5, 3) and out[0, 0].tolist() == [9, 9, 9]


def test_it_decodes_big_jpegs_at_a_reduced_scale_that_still_covers_the_size(tmp_path):
    from tests.datasets.conftest import noise_image

    path = tmp_path / "big.jpg"
    smooth = noise_image((80, 60)).resize((1600, 1200), Image.Resampling.BICUBIC)
    smooth.save(path, quality=95)
    image = load_image(path, draft_size=(200, 150))
    assert image.size == (200, 150)  # 1/8 scale: the largest reduction still >= 200 x 150
    fast = prepare_image(path, width=200, height=150, channels=3, resize_mode="squash")
    full = np.asarray(Image.open(path).convert("RGB").resize((200, 150), Image.Resampling.BILINEAR))
    assert fast.shape == (150, 200, 3)
    assert np.abs(fast.astype(int) - full.astype(int)).mean() < 3  # the same picture
