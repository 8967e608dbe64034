"""Every listed network trains a step on a dataset of the smallest size it accepts; the custom
network is validated layer by layer; fine-tuning loads matching tensors and replaces the head."""

from __future__ import annotations

import logging
import time

import pytest
import torch
import torchvision

from tests.support.trainer_data import make_dataset_folder
from trainer.config import NETWORKS
from trainer.custom_net import CustomNetError, build_custom, layer_shapes
from trainer.engine import StopFlag, build_run, evaluate, train_one_epoch
from trainer.events import Events
from trainer.networks import InputSpec, build_model, load_pretrained
from trainer.zoo import is_timm

from .conftest import make_config

# The smallest square side each network accepts (checked by test_config's size messages), so the
# one-step test is as cheap as the network allows.
SIZES = {
    "lenet": 8,
    "alexnet": 64,
    "googlenet": 16,
    "resnet18": 8,
    "resnet34": 8,
    "resnet50": 8,
    "vgg16": 32,
    "mobilenet_v3_small": 8,
    "mobilenet_v3_large": 8,
    "efficientnet_b0": 8,
    "vit_b_16": 16,
}
HEAVY = {"vgg16", "vit_b_16"}  # 138M / 86M parameters: a few seconds per step on 2 CPU cores

CUSTOM = [
    {"type": "conv2d", "out_channels": 8, "kernel_size": 3, "padding": 1},
    {"type": "batch_norm"},
    {"type": "relu"},
    {"type": "max_pool", "kernel_size": 2},
    {"type": "dropout", "p": 0.1},
    {"type": "flatten"},
    {"type": "linear", "out_features": 16},
    {"type": "leaky_relu"},
    {"type": "linear", "out_features": "classes"},
]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    cache = {}

    def get(size: int, channels: int):
        if (size, channels) not in cache:
            cache[size, channels] = make_dataset_folder(
                tmp_path_factory.mktemp(f"s{size}c{channels}") / "ds",
                num_classes=3,
                size=size,
                channels=channels,
                train=4,
                val=2,
            )
        return cache[size, channels]

    return get


# Every network with RGB and with gray input (the stem adaptation), except the gray variants of
# the two heavy ones, whose stems are covered by test_it_adapts_the_stem_to_one_channel.
# The zoo's (timm's) networks are covered by tests/trainer/test_zoo.py, one of them end to end.
CASES = [(n, c) for n in NETWORKS if not is_timm(n) for c in (1, 3) if not (c == 1 and n in HEAVY)]


@pytest.mark.parametrize(("network", "channels"), CASES)
def test_it_trains_one_step_of_every_network(tmp_path, folders, network, channels):
    extra = {"custom_layers": CUSTOM} if network == "custom" else {}
    cfg = make_config(
        tmp_path / "run", folders(SIZES.get(network, 8), channels), network=network, batch_size=2, epochs=0.5, **extra
    )
    run = build_run(cfg, rank=0, world=1, devices=[torch.device("cpu")], events=Events(None), stop=StopFlag())
    before = [p.detach().clone() for p in run.model.parameters()]
    started = time.perf_counter()
    train_one_epoch(run, 0)
    seconds = time.perf_counter() - started
    assert run.step == 1 and run.total_steps == 1
    assert torch.isfinite(torch.tensor(run.meter.loss()))  # the loss of the step taken
    assert any(not torch.equal(a, b) for a, b in zip(before, run.model.parameters(), strict=True))
    assert set(evaluate(run)) == {"val_loss", "top1"}
    if network in HEAVY:
        print(f"{network}: one step took {seconds:.1f}s")  # marked heavy; runs anyway


def test_it_adapts_the_stem_to_one_channel():
    model = build_model("resnet18", InputSpec(1, 8, 8, 4))
    assert model.conv1.in_channels == 1
    assert model(torch.zeros(2, 1, 8, 8)).shape == (2, 4)
    vit = build_model("vit_b_16", InputSpec(1, 16, 16, 4))
    assert vit.conv_proj.in_channels == 1 and vit(torch.zeros(1, 1, 16, 16)).shape == (1, 4)
    with torch.device("meta"):
        vgg = build_model("vgg16", InputSpec(1, 32, 32, 4))
    assert vgg.features[0].in_channels == 1 and vgg(torch.zeros(1, 1, 32, 32, device="meta")).shape == (1, 4)


def test_it_computes_custom_layer_shapes_for_the_editor():
    shapes = layer_shapes(CUSTOM, 1, 8, 8, 5)
    assert [s["shape"] for s in shapes] == [
        [1, 8, 8],
        [8, 8, 8],
        [8, 8, 8],
        [8, 8, 8],
        [8, 4, 4],
        [8, 4, 4],
        [128],
        [16],
        [16],
        [5],
    ]
    model = build_custom(CUSTOM, 1, 8, 8, 5)
    assert model(torch.zeros(2, 1, 8, 8)).shape == (2, 5)


@pytest.mark.parametrize(
    ("layers", "message"),
    [
        ([{"type": "conv3d"}], "layer 0: type 'conv3d' is not one of conv2d, linear"),
        (
            [{"type": "conv2d", "out_channels": 4, "kernel_size": 3, "padd": 1}],
            "layer 0 (conv2d): unknown parameter 'padd' (allowed: bias, dilation, groups, kernel_size, out_channels",
        ),
        (
            [{"type": "conv2d", "kernel_size": 3}, {"type": "flatten"}, {"type": "linear"}],
            "layer 0 (conv2d): missing parameter 'out_channels'",
        ),
        ([{"type": "linear"}], "layer 0 (linear): input is [1, 8, 8]; add a 'flatten' layer before it"),
        ([{"type": "max_pool", "kernel_size": 16}, {"type": "flatten"}, {"type": "linear"}], "layer 0 (max_pool)"),
        ([{"type": "flatten"}, {"type": "relu"}], "needs a final 'linear' layer"),
        ([{"type": "flatten"}, {"type": "linear", "out_features": 7}], "outputs [7], expected [5] classes"),
    ],
)
def test_it_names_the_bad_custom_layer(layers, message):
    with pytest.raises(CustomNetError) as info:
        layer_shapes(layers, 1, 8, 8, 5)
    assert message in str(info.value)


def test_it_fine_tunes_from_a_state_dict_and_replaces_the_head(tmp_path, caplog):
    torch.manual_seed(0)
    source = torchvision.models.resnet18(weights=None, num_classes=1000)
    torch.save(source.state_dict(), tmp_path / "imagenet.pt")
    model = build_model("resnet18", InputSpec(1, 16, 16, 3))
    with caplog.at_level(logging.INFO, logger="trainer"):
        loaded, skipped = load_pretrained(model, str(tmp_path / "imagenet.pt"))
    assert sorted(skipped) == ["fc.bias", "fc.weight"]
    # The line reaches the run page: the weights' server file is not in it, by path or by name.
    assert "loaded 120 tensors, skipped 2" in caplog.text and "imagenet" not in caplog.text
    assert "conv1.weight" in loaded and "layer4.1.bn2.running_var" in loaded
    torch.testing.assert_close(model.conv1.weight, source.conv1.weight.sum(dim=1, keepdim=True))
    torch.testing.assert_close(model.layer2[0].conv1.weight, source.layer2[0].conv1.weight)
    assert model.fc.out_features == 3


def test_it_fine_tunes_from_one_of_our_checkpoints(tmp_path, gray8):
    from trainer.checkpoint import CheckpointStore
    from trainer.events import ListReporter
    from trainer.run import train

    assert train(make_config(tmp_path / "first", gray8, epochs=1), reporter=ListReporter()) == 0
    checkpoint = CheckpointStore(tmp_path / "first").latest()
    torch.load(checkpoint, weights_only=True)  # plain data only: safe to load
    model = build_model("lenet", InputSpec(1, 8, 8, 5))  # 5 classes: a different head
    loaded, skipped = load_pretrained(model, str(checkpoint))
    assert skipped == ["classifier.3.weight", "classifier.3.bias"]
    assert "features.0.weight" in loaded and "classifier.1.weight" in loaded


def test_it_refuses_a_custom_network_too_big_to_train_with_the_numbers():
    # linear(out_features=1e8) on 64 inputs: 6.4e9 parameters (~100 GB to train) was queued.
    huge = [{"type": "flatten"}, {"type": "linear", "out_features": 100_000_000}, {"type": "linear"}]
    with pytest.raises(
        CustomNetError, match=r"layer 1 \(linear\): the network reaches 6,500,000,000 parameters"
    ) as info:
        layer_shapes(huge, 1, 8, 8, 5)
    assert "over the limit of 1,000,000,000" in str(info.value) and "GiB to train" in str(info.value)
    wide = [{"type": "conv2d", "out_channels": 1_000_000, "kernel_size": 33}, {"type": "flatten"}, {"type": "linear"}]
    with pytest.raises(CustomNetError, match="layer 0 .conv2d.: the network reaches"):
        layer_shapes(wide, 3, 64, 64, 5)
    with pytest.raises(CustomNetError, match="layer 1 .linear.: "):
        layer_shapes([{"type": "flatten"}, {"type": "linear", "out_features": 10**400}, {"type": "linear"}], 1, 8, 8, 5)


def test_it_refuses_too_many_layers_before_building_any():
    many = [{"type": "relu"}] * 200_000 + [{"type": "flatten"}, {"type": "linear"}]
    started = time.monotonic()
    with pytest.raises(CustomNetError, match="custom_layers: 200002 layers; at most 256"):
        layer_shapes(many, 1, 8, 8, 5)
    assert time.monotonic() - started < 1


def test_it_refuses_weights_that_match_none_of_the_networks_tensors(tmp_path, gray8):
    from trainer.config import ConfigError
    from trainer.events import ListReporter
    from trainer.protocol import EXIT_CONFIG
    from trainer.run import train

    # A state_dict of another network: before, "loaded 0 tensors, skipped 8" and training from scratch.
    torch.save(torchvision.models.resnet18(weights=None).state_dict(), tmp_path / "resnet.pt")
    with pytest.raises(ConfigError, match=r"resnet.pt matches none of the network's \d+ tensors") as refused:
        load_pretrained(build_model("lenet", InputSpec(1, 8, 8, 5)), str(tmp_path / "resnet.pt"))
    assert refused.value.field == "pretrained" and "the file holds 122: bn1.bias" in str(refused.value)
    reporter = ListReporter()
    cfg = make_config(tmp_path / "run", gray8, epochs=1, pretrained=str(tmp_path / "resnet.pt"))
    assert train(cfg, reporter=reporter) == EXIT_CONFIG
    assert "matches none of the network's" in reporter.events[-1]["message"]


def test_it_fine_tunes_from_safetensors_whatever_the_name_and_refuses_a_bomb_at_run_start(tmp_path):
    from tests.support.weights_files import padded_bomb, save_safetensors
    from trainer.config import ConfigError

    # `weights import` filed safetensors under a .pth name: every run started from them failed.
    source = build_model("lenet", InputSpec(1, 8, 8, 3)).state_dict()
    save_safetensors(source, tmp_path / "imported.pth")
    loaded, skipped = load_pretrained(build_model("lenet", InputSpec(1, 8, 8, 3)), str(tmp_path / "imported.pth"))
    assert len(loaded) == len(source) and skipped == []

    padded_bomb(source, tmp_path / "bomb.pt")
    with pytest.raises(ConfigError, match=r"bomb.pt: record 'archive/data/bomb' inflates") as refused:
        load_pretrained(build_model("lenet", InputSpec(1, 8, 8, 3)), str(tmp_path / "bomb.pt"))
    assert refused.value.field == "pretrained"
