"""The training preprocessing of one image outside training (inference, exports, the bench):
resize to the dataset size by its resize mode -> centre crop (if trained with crops) -> uint8
C x H x W. The task's predictor normalises the result as its network was trained.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image


def resize_image(image: Image.Image, width: int, height: int, mode: str) -> Image.Image:
    """DIGITS' resize modes. `fill` and `half_crop` pad with noise, as DIGITS does (a seeded
    noise, so the same image always gives the same result)."""
    iw, ih = image.size
    if mode == "squash" or (iw, ih) == (width, height):
        return image.resize((width, height), Image.BILINEAR)
    cover, fit = max(width / iw, height / ih), min(width / iw, height / ih)
    scale = {"crop": cover, "fill": fit, "half_crop": (cover + fit) / 2}.get(mode)
    if scale is None:
        raise ValueError(f"resize_mode: {mode!r} is not one of squash, crop, fill, half_crop")
    rw, rh = max(1, round(iw * scale)), max(1, round(ih * scale))
    resized = image.resize((rw, rh), Image.BILINEAR)
    left, top = max(0, (rw - width) // 2), max(0, (rh - height) // 2)
    resized = resized.crop((left, top, left + min(rw, width), top + min(rh, height)))
    if resized.size == (width, height):
        return resized
    bands = len(resized.getbands())
    noise = np.random.default_rng(0).integers(0, 256, size=(height, width, bands), dtype=np.uint8)
    canvas = Image.fromarray(noise[:, :, 0] if bands == 1 else noise, mode=resized.mode)
    canvas.paste(resized, ((width - resized.size[0]) // 2, (height - resized.size[1]) // 2))
    return canvas


def image_to_uint8(image: Image.Image, pre: dict[str, Any]) -> np.ndarray:
    """PIL image -> uint8 C x H x W as the model saw it in training (before normalisation)."""
    image = image.convert("L" if pre["channels"] == 1 else "RGB")
    image = resize_image(image, pre["width"], pre["height"], pre["resize_mode"])
    arr = np.asarray(image, dtype=np.uint8)
    chw = arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1)
    crop = pre.get("crop")
    if crop:
        top, left = (chw.shape[1] - crop) // 2, (chw.shape[2] - crop) // 2
        chw = chw[:, top : top + crop, left : left + crop]
    return np.ascontiguousarray(chw)


def uint8_batch(images: list[Image.Image], pre: dict[str, Any]) -> np.ndarray:
    """The images as one uint8 N x C x H x W batch, each preprocessed as in training."""
    return np.stack([image_to_uint8(image, pre) for image in images])
