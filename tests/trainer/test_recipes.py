"""Recipes: the device-side augmentations, mixup/cutmix, label smoothing, LAMB and the weights'
average train end to end; presets fill what a config leaves out; refusals name the field."""

from __future__ import annotations

import pytest
import torch

from trainer.augment import TrainAugment
from trainer.checkpoint import CheckpointStore
from trainer.config import ConfigError, config_from_dict
from trainer.engine import prepare
from trainer.events import ListReporter
from trainer.protocol import EXIT_DONE
from trainer.run import train

from .conftest import make_config

RECIPE = {
    "data": {
        "random_resized_crop": True,
        "crop_size": 12,
        "random_flip": True,
        "auto_augment": "trivialaugment",
        "color_jitter": 0.4,
        "random_erasing": 0.5,
        "mixup_alpha": 0.2,
        "cutmix_alpha": 1.0,
    },
    "solver": {"optimizer": "lamb", "base_lr": 0.01, "label_smoothing": 0.1, "ema_decay": 0.99},
}


def test_it_trains_with_the_whole_recipe_and_validates_the_weights_average(tmp_path, rgb16):
    reporter = ListReporter()
    cfg = make_config(tmp_path / "run", rgb16, epochs=1, batch_size=8, **RECIPE)
    assert train(cfg, reporter=reporter) == EXIT_DONE
    validation = [e for e in reporter.events if e["type"] == "validation"][-1]
    # The raw weights' metrics and the average's, side by side, for the live page's two curves.
    assert {"top1", "val_loss", "ema_top1", "ema_val_loss"} <= set(validation)
    state = CheckpointStore.load(CheckpointStore(tmp_path / "run").latest())
    # The checkpoint's model (what exports load) is the average; the raw weights are kept to resume.
    assert any(not torch.equal(state["model"][k], state["model_raw"][k]) for k in state["model"])


def test_it_augments_every_image_of_the_batch_on_its_own_and_repeats_a_step():
    cfg = config_from_dict({"run_dir": "r", **RECIPE}, check_paths=False)
    augment = TrainAugment(cfg, num_classes=3, out_size=(12, 12))
    images = torch.arange(16 * 3 * 16 * 16, dtype=torch.int64).remainder(251).to(torch.uint8).view(16, 3, 16, 16)
    images[:] = images[0]  # one image sixteen times: the crops must still differ
    labels = torch.tensor([0, 1, 2, 0] * 4)

    def normalize(batch):
        return batch.float() / 255

    x, y = augment(images, labels, step=3, normalize=normalize)
    assert x.shape == (16, 3, 12, 12) and y.shape == (16, 3)
    assert torch.allclose(y.sum(dim=1), torch.ones(16)) and y.min() > 0  # smoothed class probabilities
    crops = augment.images(images[:8])
    assert len({bytes(crop.numpy()) for crop in crops}) > 1
    again, _ = augment(images, labels, step=3, normalize=normalize)
    assert torch.equal(x, again)  # a resumed run sees the same augmentations at the same step


def test_it_refuses_colour_jitter_on_grey_images_and_recipes_on_other_tasks(tmp_path, gray8):
    cfg = make_config(tmp_path / "run", gray8, data={"color_jitter": 0.4})
    with pytest.raises(ConfigError) as refused:
        prepare(cfg)
    assert refused.value.field == "data.color_jitter" and "grey" in refused.value.message
    with pytest.raises(ConfigError) as refused:
        config_from_dict({"run_dir": "r", "data": {"rrc_scale": [0.9, 0.1]}}, check_paths=False)
    assert refused.value.field == "data.rrc_scale"


def test_it_fills_what_a_config_leaves_out_from_its_preset():
    cfg = config_from_dict({"run_dir": "r", "preset": "deit", "solver": {"base_lr": 0.0005}}, check_paths=False)
    assert cfg.solver.optimizer == "adamw" and cfg.solver.base_lr == 0.0005  # what is sent wins
    assert cfg.data.mixup_alpha == 0.8 and cfg.data.auto_augment == "randaugment" and cfg.epochs == 300
    with pytest.raises(ConfigError) as refused:
        config_from_dict({"run_dir": "r", "preset": "imagenet-magic"}, check_paths=False)
    assert refused.value.field == "preset" and "torchvision_resnet_v2" in refused.value.message
