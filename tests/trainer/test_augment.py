"""The device's uint8 stage (trainer/augment.py): every image draws its own policy operation and
colour jitter, and the batch stays uint8 at its size."""

from __future__ import annotations

import pytest
import torch

from trainer.augment import TrainAugment
from trainer.config import config_from_dict

SEEDS = range(6)


def twins(count: int = 2, side: int = 24) -> torch.Tensor:
    """`count` copies of one noisy RGB image: any operation but the identity changes it."""
    image = torch.randint(0, 256, (3, side, side), dtype=torch.uint8, generator=torch.Generator().manual_seed(7))
    return image.expand(count, -1, -1, -1).contiguous()


def augmented(data: dict, *, seed: int, images: torch.Tensor, side: int = 24) -> torch.Tensor:
    """The step-0 uint8 batch of a run with `data` and `seed` (normalisation left out)."""
    cfg = config_from_dict({"run_dir": "r", "seed": seed, "data": data}, check_paths=False)
    augment = TrainAugment(cfg, num_classes=2, out_size=(side, side))
    x, _ = augment(images, torch.zeros(images.shape[0], dtype=torch.int64), step=0, normalize=lambda batch: batch)
    return x


@pytest.mark.parametrize(
    "data",
    [
        {"auto_augment": "trivialaugment"},
        {"auto_augment": "randaugment"},
        {"auto_augment": "autoaugment"},
        {"color_jitter": 0.4},
    ],
    ids=["trivialaugment", "randaugment", "autoaugment", "color_jitter"],
)
def test_it_draws_the_operation_of_every_image_on_its_own(data):
    # Drawn once per group of images, two copies of one image in a batch came out alike with every
    # seed; drawn per image they differ but for an unlucky draw of the same operation (or two
    # identities: AutoAugment applies each of its operations with a probability).
    differ = 0
    for seed in SEEDS:
        x = augmented(data, seed=seed, images=twins())
        assert x.dtype == torch.uint8 and x.shape == (2, 3, 24, 24)
        differ += not torch.equal(x[0], x[1])
    assert differ >= len(SEEDS) - 1, f"{data}: the twins differ with {differ} of {len(SEEDS)} seeds"


def test_it_keeps_the_batch_uint8_at_the_crops_size_and_repeats_it_with_the_same_seed():
    data = {"random_resized_crop": True, "auto_augment": "trivialaugment", "color_jitter": 0.3}
    x = augmented(data, seed=3, images=twins(count=16), side=16)
    assert x.dtype == torch.uint8 and x.shape == (16, 3, 16, 16)
    assert len({bytes(image.numpy()) for image in x}) == 16  # sixteen copies, sixteen results
    assert torch.equal(x, augmented(data, seed=3, images=twins(count=16), side=16))
    assert not torch.equal(x, augmented(data, seed=4, images=twins(count=16), side=16))
