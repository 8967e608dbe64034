"""Reading user images: identify by content, convert by explicit rules, resize like DIGITS.

No Django here: build worker processes import this module alone.

Conversion rules (what each odd image becomes before resizing):
- palette (P) without transparency -> its RGB colours; with transparency -> like RGBA;
- alpha (RGBA, LA, PA) -> composited onto black (the same rule `trainer.datum` uses when it decodes);
- CMYK, YCbCr, LAB, HSV -> Pillow's conversion to RGB;
- 16-bit gray (I;16*, I with values above 255) -> 8 bit by value / 257, rounded (65535 -> 255);
- 1-bit -> 0 / 255 gray;
- 32-bit float (F) -> refused (no agreed range to map from);
- animated GIF / multi-page TIFF -> the first frame;
- then to the requested channels: gray -> RGB repeats the channel, RGB -> gray is ITU-R 601-2 luma.
"""

from __future__ import annotations

import dataclasses
import io
import os
import warnings
from typing import BinaryIO

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from datasets.names import os_error_text

RESIZE_MODES = ("squash", "crop", "fill", "half_crop")
# Formats a dataset may contain; anything else is "not an image" even if Pillow could open it.
FORMATS = ("JPEG", "PNG", "BMP", "GIF", "TIFF", "WEBP", "PPM")


class ImageRefused(ValueError):
    """An input image that is skipped; the message is the reason shown to the user."""


@dataclasses.dataclass(frozen=True)
class ImageLimits:
    """What one user image may measure, judged from its header before a pixel is decoded.

    The pixel count alone bounds neither memory nor work: a 155 KB PNG of 1 x 80,000,000 pixels is
    under Pillow's limit, yet its decode and the resize after it (Pillow resamples one axis at a
    time, so the intermediate is the target's width times the source's height) cost gigabytes. The
    longest side bounds that intermediate; the aspect ratio bounds a cover-style resize (crop),
    whose scaled image is the target's area times the ratio.
    """

    max_pixels: int = 89_478_485  # Pillow's own default
    max_side: int = 16_384
    max_aspect: float = 20.0

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


# Per process: the web and Celery processes set it from settings (datasets.apps), build workers and
# job children from what their parent passes them.
_limits = ImageLimits()


def set_image_limits(limits: ImageLimits) -> None:
    """This process's limits; Pillow's decompression-bomb limit (it stays on) follows max_pixels."""
    global _limits
    _limits = limits
    Image.MAX_IMAGE_PIXELS = int(limits.max_pixels)


def image_limits() -> ImageLimits:
    return _limits


def set_max_pixels(max_pixels: int) -> None:
    """Only the pixel limit of this process's limits (tests and benchmarks)."""
    set_image_limits(dataclasses.replace(_limits, max_pixels=int(max_pixels)))


def check_image_size(width: int, height: int) -> None:
    """Refuse an image by its sides, its aspect ratio and its pixel count: the one rule for every
    image a request or a build decodes, applied to the header (Image.open is lazy) before load().

    The message names the image's sides and the limit, never where the file lies."""
    limits = _limits
    sides = f"{width} x {height} pixels"
    if width < 1 or height < 1:
        raise ImageRefused(f"image is {sides}: it has no pixels")
    if max(width, height) > limits.max_side:
        raise ImageRefused(f"image is {sides}: a side is over the limit of {limits.max_side} pixels")
    if max(width, height) / min(width, height) > limits.max_aspect:
        raise ImageRefused(f"image is {sides}: its sides' ratio is over the limit of {limits.max_aspect:g} to 1")
    if width * height > limits.max_pixels:
        raise ImageRefused(f"image is {sides}: over the limit of {limits.max_pixels} pixels")


def load_image(
    source: str | os.PathLike[str] | bytes | BinaryIO, draft_size: tuple[int, int] | None = None
) -> Image.Image:
    """Open and fully decode one image, or raise ImageRefused naming the problem.

    With `draft_size` (width, height), a JPEG at least twice that size is decoded at a reduced scale
    (1/2, 1/4 or 1/8, DCT scaling inside libjpeg) that still covers the size: a 12-megapixel photo
    bound for 256 x 256 decodes several times faster, and the resize that follows is a downscale.
    """
    if isinstance(source, bytes):
        if not source:
            raise ImageRefused("empty file (0 bytes)")
        source = io.BytesIO(source)
    elif isinstance(source, str | os.PathLike):
        try:
            if os.path.getsize(source) == 0:
                raise ImageRefused("empty file (0 bytes)")
        except FileNotFoundError:
            raise ImageRefused("file not found") from None
    try:
        with warnings.catch_warnings():
            # Pillow only warns between MAX_IMAGE_PIXELS and twice that; a bomb is a bomb.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(source, formats=FORMATS)
            try:
                check_image_size(*image.size)  # the header's sides, before any pixel is decoded
                if draft_size is not None and image.format == "JPEG":
                    image.draft(image.mode, draft_size)
                if getattr(image, "n_frames", 1) > 1:
                    image.seek(0)
                image.load()
            except BaseException:
                image.close()
                raise
    except ImageRefused:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageRefused(f"decompression bomb refused: {exc}") from None
    except UnidentifiedImageError:
        raise ImageRefused("not an image (content is not JPEG, PNG, BMP, GIF, TIFF, WebP or PPM)") from None
    except FileNotFoundError:
        raise ImageRefused("file not found") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        message = os_error_text(exc)  # an OSError's file name is the path: never in a reason
        if "truncated" in message.lower():
            raise ImageRefused(f"truncated image ({message})") from None
        raise ImageRefused(f"image cannot be decoded ({message})") from None
    return image


def _flatten_alpha(image: Image.Image) -> Image.Image:
    rgba = image.convert("RGBA")
    background = Image.new("RGBA", rgba.size, (0, 0, 0, 255))
    return Image.alpha_composite(background, rgba).convert("RGB")


def convert_image(image: Image.Image, channels: int) -> Image.Image:
    """Apply the conversion rules; returns an image in mode L (channels=1) or RGB (channels=3)."""
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 or 3, not {channels}")
    # EXIF orientation: a phone photo is stored sideways and displayed upright; train on upright.
    if image.getexif().get(0x0112, 1) not in (0, 1):
        image = ImageOps.exif_transpose(image)
    mode = image.mode
    if mode == "F":
        raise ImageRefused("32-bit floating point images are not supported")
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I"):
        values = np.asarray(image, dtype=np.float64)
        if mode == "I" and values.size and values.max() <= 255 and values.min() >= 0:
            gray = values.astype(np.uint8)
        else:
            gray = np.clip(np.rint(values / 257.0), 0, 255).astype(np.uint8)
        image = Image.fromarray(gray, mode="L")
    elif mode in ("RGBA", "LA", "PA", "La", "RGBa") or (mode == "P" and "transparency" in image.info):
        image = _flatten_alpha(image)
    elif mode == "1":
        image = image.convert("L")
    elif mode not in ("L", "RGB"):
        image = image.convert("RGB")
    target = "L" if channels == 1 else "RGB"
    return image if image.mode == target else image.convert(target)


def _as_hwc(image: Image.Image) -> np.ndarray:
    array = np.asarray(image, dtype=np.uint8)
    return array[:, :, None] if array.ndim == 2 else array


def to_array(image: Image.Image, channels: int) -> np.ndarray:
    """Apply the conversion rules; returns uint8 H x W x C (C = channels)."""
    return _as_hwc(convert_image(image, channels))


def _resize(array: np.ndarray, height: int, width: int) -> np.ndarray:
    # Bilinear, as DIGITS (scipy.misc.imresize(interp='bilinear')).
    if array.shape[0] == height and array.shape[1] == width:
        return array
    image = Image.fromarray(array[:, :, 0] if array.shape[2] == 1 else array)
    out = np.asarray(image.resize((width, height), Image.Resampling.BILINEAR), dtype=np.uint8)
    return out[:, :, None] if out.ndim == 2 else out


def _noise(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, 255, size=shape, dtype=np.uint8)


def resize_image(
    array: np.ndarray, height: int, width: int, mode: str, rng: np.random.Generator | None = None
) -> np.ndarray:
    """Resize uint8 H x W x C to height x width with DIGITS's meaning of each mode.

    - squash: stretch to the size, aspect ratio not kept;
    - crop: scale so the image covers the size, keep the ratio, cut the centre;
    - fill: scale so the image fits inside, keep the ratio, pad both sides with random noise;
    - half_crop: scale by the mean of the two ratios, cut the long side's centre and pad the
      short side with noise (half of the excess cropped, half filled).
    The noise comes from `rng` so a build is reproducible.
    """
    if mode not in RESIZE_MODES:
        raise ValueError(f"resize mode {mode!r} is not one of {', '.join(RESIZE_MODES)}")
    h, w, _ = array.shape
    if h == height and w == width:
        return array
    width_ratio = w / width
    height_ratio = h / height
    if mode == "squash" or width_ratio == height_ratio:
        return _resize(array, height, width)
    if mode == "crop":
        return _crop(array, height, width, wide=width_ratio > height_ratio)
    rng = rng if rng is not None else np.random.default_rng(0)
    if mode == "fill":
        out = _fit_inside(array, height, width, wide=width_ratio > height_ratio)
    else:
        out = _half_crop(array, height, width, wide=width_ratio > height_ratio)
    return _pad_with_noise(out, height, width, wide=width_ratio > height_ratio, rng=rng)


# In the helpers below, `wide` means the image is wider than the target's aspect ratio.


def _centre_cut(array: np.ndarray, height: int, width: int, *, wide: bool) -> np.ndarray:
    if wide:
        start = int(round((array.shape[1] - width) / 2.0))
        return array[:, start : start + width]
    start = int(round((array.shape[0] - height) / 2.0))
    return array[start : start + height, :]


def _crop(array: np.ndarray, height: int, width: int, *, wide: bool) -> np.ndarray:
    """Scale so the image covers height x width, keep the ratio, cut the centre."""
    h, w = array.shape[:2]
    if wide:
        resize_height, resize_width = height, int(round(w / (h / height)))
    else:
        resize_width, resize_height = width, int(round(h / (w / width)))
    out = _resize(array, resize_height, resize_width)
    return np.ascontiguousarray(_centre_cut(out, height, width, wide=wide))


def _fit_inside(array: np.ndarray, height: int, width: int, *, wide: bool) -> np.ndarray:
    """Scale so the image fits inside, keep the ratio; the short side's excess stays even (to pad)."""
    return _resize(array, *_fit_inside_size(*array.shape[:2], height, width, wide=wide))


def _fit_inside_size(h: int, w: int, height: int, width: int, *, wide: bool) -> tuple[int, int]:
    if wide:
        resize_width, resize_height = width, int(round(h / (w / width)))
        if (height - resize_height) % 2 == 1:
            resize_height += 1
    else:
        resize_height, resize_width = height, int(round(w / (h / height)))
        if (width - resize_width) % 2 == 1:
            resize_width += 1
    return resize_height, resize_width


def _half_crop(array: np.ndarray, height: int, width: int, *, wide: bool) -> np.ndarray:
    """Scale by the mean of the two ratios, then cut the long side's centre (the short side is padded)."""
    h, w = array.shape[:2]
    new_ratio = (w / width + h / height) / 2.0
    resize_width = int(round(w / new_ratio))
    resize_height = int(round(h / new_ratio))
    if wide and (height - resize_height) % 2 == 1:
        resize_height += 1
    elif not wide and (width - resize_width) % 2 == 1:
        resize_width += 1
    out = _resize(array, resize_height, resize_width)
    return _centre_cut(out, height, width, wide=wide)


def _pad_with_noise(out: np.ndarray, height: int, width: int, *, wide: bool, rng: np.random.Generator) -> np.ndarray:
    """Pad the short dimension on both sides with noise, as DIGITS does."""
    c = out.shape[2]
    if wide:
        padding = (height - out.shape[0]) // 2
        if padding > 0:
            out = np.concatenate([_noise((padding, width, c), rng), out, _noise((padding, width, c), rng)], axis=0)
    else:
        padding = (width - out.shape[1]) // 2
        if padding > 0:
            out = np.concatenate([_noise((height, padding, c), rng), out, _noise((height, padding, c), rng)], axis=1)
    return np.ascontiguousarray(out[:height, :width])


def fit_geometry(w: int, h: int, width: int, height: int, mode: str) -> tuple[float, float, int, int, int, int]:
    """Where resize_image puts a w x h image in width x height: (scale x, scale y, left, top,
    resized width, resized height), so boxes and masks move with their image. Detection and
    segmentation take squash and fill only (crop would cut objects in half unseen)."""
    if mode == "squash" or w * height == h * width:
        return width / w, height / h, 0, 0, width, height
    if mode != "fill":
        raise ValueError(f"resize mode {mode!r} cannot move boxes and masks; use squash or fill")
    wide = w / width > h / height
    resized_h, resized_w = _fit_inside_size(h, w, height, width, wide=wide)
    left = 0 if wide else (width - resized_w) // 2
    top = (height - resized_h) // 2 if wide else 0
    return resized_w / w, resized_h / h, left, top, resized_w, resized_h


def prepare_image(source, *, width: int, height: int, channels: int, resize_mode: str, seed: int = 0) -> np.ndarray:
    """load -> convert -> resize: the whole per-image pipeline (build, preview and tests)."""
    image = load_image(source, draft_size=(width, height))
    try:
        converted = convert_image(image, channels)
        w, h = converted.size
        if resize_mode == "squash" or w * height == h * width:
            # The common case stays inside Pillow: one resize, one copy out to numpy.
            if (w, h) != (width, height):
                converted = converted.resize((width, height), Image.Resampling.BILINEAR)
            return _as_hwc(converted)
        array = _as_hwc(converted)
    finally:
        image.close()
    return resize_image(array, height, width, resize_mode, rng=np.random.default_rng(seed))


def to_png_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array[:, :, 0] if array.shape[2] == 1 else array).save(buf, format="PNG")
    return buf.getvalue()
