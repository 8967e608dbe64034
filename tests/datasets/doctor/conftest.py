import io

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageOps

from tests.support.factories import make_dataset_row
from tests.support.trainer_data import write_dataset_folder

SIDE = 32


def distinct_images(count: int, seed: int = 0) -> list[np.ndarray]:
    """Grey pictures no two alike: a smooth random field with a few random shapes on it."""
    rng = np.random.default_rng(seed)
    images = []
    for _ in range(count):
        field = Image.fromarray(np.uint8(np.clip(128 + 50 * rng.normal(0, 1, (6, 6)), 0, 255)))
        picture = field.resize((SIDE, SIDE), Image.Resampling.BICUBIC)
        draw = ImageDraw.Draw(picture)
        for _ in range(3):
            x, y = rng.integers(0, SIDE - 6, 2)
            draw.ellipse((x, y, x + rng.integers(4, 16), y + rng.integers(4, 16)), fill=int(rng.integers(0, 256)))
        images.append(np.asarray(picture))
    return images


def mirrored_jpeg(image: np.ndarray, quality: int = 60) -> np.ndarray:
    buffer = io.BytesIO()
    ImageOps.mirror(Image.fromarray(image)).save(buffer, format="JPEG", quality=quality)
    return np.asarray(Image.open(buffer).convert("L"))


def resized_cropped(image: np.ndarray) -> np.ndarray:
    """Twice the size, 5 % cut from the left and top, back to the stored size."""
    big = Image.fromarray(image).resize((2 * SIDE, 2 * SIDE), Image.Resampling.BILINEAR)
    cut = round(0.05 * 2 * SIDE)
    return np.asarray(big.crop((cut, cut, 2 * SIDE, 2 * SIDE)).resize((SIDE, SIDE), Image.Resampling.BILINEAR))


@pytest.fixture
def leaky_dataset(owner):
    """A built dataset whose val split holds a mirrored, re-encoded copy of a training image, and
    whose training split holds an exact copy of another: one leak, one copy within a split."""
    train, val = distinct_images(30, seed=1), distinct_images(10, seed=2)
    train.append(train[3].copy())  # train 30 = train 3
    val.append(mirrored_jpeg(train[7]))  # val 10 ~ train 7
    dataset = make_dataset_row(owner, name="leaky", image_width=SIDE, image_height=SIDE, channels=1,
                               labels=["a", "b"], splits={"train": {"count": 31}, "val": {"count": 11}})  # fmt: skip
    as_split = lambda images: (np.stack(images)[..., None], np.arange(len(images)) % 2)  # noqa: E731
    write_dataset_folder(dataset.path, {"train": as_split(train), "val": as_split(val)}, ["a", "b"])
    return dataset
