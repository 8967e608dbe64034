"""Fine-tuning from pretrained weights: the head replaced, the backbone frozen then slowed, the
weights' own normalisation, BatchNorm in eval mode (trainer/finetune/recipe.py)."""

from __future__ import annotations

import pytest
import torch
import torchvision

from tests.trainer.conftest import make_config
from trainer.checkpoint import CheckpointStore
from trainer.events import ListReporter
from trainer.inference import load_checkpoint_classifier
from trainer.protocol import EXIT_DONE, snapshots
from trainer.run import train


def test_it_fine_tunes_with_the_backbone_frozen_for_the_first_epoch(tmp_path, rgb16):
    torch.manual_seed(1)
    weights = torchvision.models.resnet18(weights=None).state_dict()  # as a published file: 1000 classes
    torch.save(weights, tmp_path / "resnet18-lab.pth")
    cfg = make_config(
        tmp_path / "run",
        rgb16,
        network="resnet18",
        epochs=2,
        batch_size=24,
        val_interval=0,
        snapshot_interval=1,
        pretrained=str(tmp_path / "resnet18-lab.pth"),
        freeze_backbone_epochs=1,
        backbone_lr_mult=0.1,
        freeze_bn=True,
        data={"norm_mean": [0.485, 0.456, 0.406], "norm_std": [0.229, 0.224, 0.225]},
    )
    reporter = ListReporter()

    assert train(cfg, reporter=reporter) == EXIT_DONE

    lines = [event["line"] for event in reporter.of_type("log")]
    assert any(
        "loaded 120 tensors from the pretrained weights; replaced 2 for the dataset's 3 classes: fc.weight, fc.bias"
        in line
        for line in lines
    ), lines
    assert any("frozen for the first 1 epoch(s)" in line and "20 BatchNorm layers" in line for line in lines), lines
    assert not any(str(tmp_path) in line for line in lines)  # no server folder reaches the run page
    (_, after_frozen), (_, last) = snapshots(cfg.run_dir)[-2:]
    frozen, trained = CheckpointStore.load(after_frozen), CheckpointStore.load(last)
    for name in ("conv1.weight", "layer4.1.conv2.weight", "bn1.weight"):
        assert torch.equal(frozen["model"][name], weights[name]), name  # not one step moved it
        assert not torch.equal(trained["model"][name], weights[name]), name  # the second epoch did
    # BatchNorm in eval mode: its running statistics are still the pretrained ones.
    assert torch.equal(trained["model"]["bn1.running_mean"], weights["bn1.running_mean"])
    assert not torch.equal(frozen["model"]["fc.bias"], trained["model"]["fc.bias"])
    assert frozen["preprocessing"]["mean"] == "weights"
    assert frozen["preprocessing"]["std"] == pytest.approx([0.229, 0.224, 0.225])
    # Inference divides by the same std (trainer.inference reads it from the checkpoint).
    assert load_checkpoint_classifier(last).normalize.std.flatten().tolist() == pytest.approx([0.229, 0.224, 0.225])
