"""Model parallelism: every network splits without a tensor crossing a stage unmoved, stages are
balanced on memory, and a split network trains to the same weights as a whole one (alone, and
with data parallelism over groups of devices)."""

from __future__ import annotations

import pytest
import torch
from torchvision.models.vision_transformer import Encoder

from tests.support.trainer_data import make_dataset_folder
from trainer.checkpoint import CheckpointStore
from trainer.config import NETWORKS, ConfigError, config_from_dict
from trainer.events import ListReporter
from trainer.networks import InputSpec, build_model
from trainer.parallel import Block, SplitError, balance, split_model
from trainer.protocol import EXIT_DONE
from trainer.run import train
from trainer.zoo import is_timm

from .conftest import make_config
from .test_networks import CUSTOM, SIZES

CPU, META = torch.device("cpu"), torch.device("meta")
# torchvision's and the workbench's own; the zoo's (timm's) are not split over devices by these tests.
CASES = [(network, 2) for network in NETWORKS if not is_timm(network)] + [
    ("resnet18", 3),
    ("vit_b_16", 3),
    ("googlenet", 4),
]


@pytest.mark.parametrize(("network", "stages"), CASES)
def test_it_splits_every_network_so_that_each_stage_boundary_moves_its_tensors(network, stages):
    # This machine has one device, so each boundary in turn is made real: stages before it on the
    # CPU, stages after it on the meta device. An operation that mixed the two (a skip connection
    # cut by the split, a container's parameter left behind) raises instead of running.
    side = SIZES.get(network, 8)
    spec = InputSpec(3, side, side, 5, CUSTOM if network == "custom" else [])
    sample = torch.zeros(1, 3, side, side)
    for boundary in range(1, stages):
        model = build_model(network, spec)
        devices = [CPU] * boundary + [META] * (stages - boundary)
        placed = split_model(model, devices, sample, batch=4, output_device=META)
        assert [stage.device for stage in placed] == devices and all(stage.blocks for stage in placed)
        model.train()
        output = model(torch.zeros(2, 3, side, side))
        assert output.device == META and output.shape == (2, 5)
        # Every block's parameters are on its stage's device.
        for stage in placed:
            for block in stage.blocks:
                assert all(p.device == stage.device for p in block.module.parameters()), block.name


def test_it_keeps_a_containers_own_parameters_where_its_input_arrives():
    # An encoder (ViT's, whose forward adds its position embedding to its input before its first
    # child) behind two blocks: one stage per block, so the encoder's input arrives on the device
    # of the second block, not the first one.
    def model() -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Linear(4, 4),
            torch.nn.Linear(4, 4),
            Encoder(
                seq_length=3, num_layers=2, num_heads=1, hidden_dim=4, mlp_dim=8, dropout=0.0, attention_dropout=0.0
            ),
        )

    sample = torch.zeros(1, 3, 4)
    for boundary in range(1, 6):
        network = model()
        devices = [CPU] * boundary + [META] * (6 - boundary)
        placed = split_model(network, devices, sample, batch=1, output_device=META)
        assert [len(stage.blocks) for stage in placed] == [1] * 6
        assert network(torch.zeros(2, 3, 4)).shape == (2, 3, 4)
        assert network[2].pos_embedding.device == (CPU if boundary >= 2 else META)


class Residual(torch.nn.Sequential):
    """A Sequential whose own forward adds a skip connection: a unit, not a chain to open."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + super().forward(x)


def test_it_never_opens_a_sequential_whose_forward_is_not_a_chain():
    def model() -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Linear(4, 4), Residual(torch.nn.Linear(4, 4), torch.nn.ReLU()), torch.nn.Linear(4, 4)
        )

    for boundary in (1, 2):
        network = model()
        devices = [CPU] * boundary + [META] * (3 - boundary)
        placed = split_model(network, devices, torch.zeros(1, 4), batch=1, output_device=META)
        assert [[block.name for block in stage.blocks] for stage in placed] == [["0"], ["1"], ["2"]]
        assert network(torch.zeros(2, 4)).shape == (2, 4)


def test_it_balances_stages_on_the_memory_of_weights_and_activations():
    def block(name: str, parameter_bytes: int, activation_bytes: int) -> Block:
        return Block(name, torch.nn.Identity(), parameter_bytes, activation_bytes)

    blocks = [block("a", 0, 100), block("b", 10, 100), block("c", 400, 0), block("d", 10, 10)]
    # Per sample, a batch of 1: costs 100, 140, 1600, 50: the big block stands alone.
    assert [[b.name for b in g] for g in balance(blocks, 2, batch=1)] == [["a", "b"], ["c", "d"]]
    assert [[b.name for b in g] for g in balance(blocks, 3, batch=1)] == [["a", "b"], ["c"], ["d"]]
    # A large batch makes the activations dominate: the first two blocks go apart.
    assert [[b.name for b in g] for g in balance(blocks, 3, batch=1000)] == [["a"], ["b"], ["c", "d"]]
    with pytest.raises(SplitError, match="4 blocks; it cannot be split into 5 stages"):
        balance(blocks, 5, batch=1)


def test_it_refuses_a_split_the_devices_cannot_form(tmp_path):
    dataset = make_dataset_folder(tmp_path / "ds", num_classes=3, size=8, channels=1, train=8, val=0)
    with pytest.raises(ConfigError, match="model_parallel: 3 devices cannot form groups of 2"):
        make_config(tmp_path / "run", dataset, devices="cpu x 3", model_parallel=2)
    with pytest.raises(ConfigError, match="model_parallel: 0 must be a positive integer"):
        make_config(tmp_path / "run", dataset, model_parallel=0)
    with pytest.raises(ConfigError, match="compile: not available with model_parallel > 1"):
        make_config(tmp_path / "run", dataset, devices="cpu x 2", model_parallel=2, compile=True)
    cfg = make_config(tmp_path / "run", dataset, devices="cpu x 4", model_parallel=2, batch_size=8)
    assert cfg.world_size == 2 and cfg.rank_devices(1) == ["cpu", "cpu"] and cfg.per_process_batch == 4
    cfg = config_from_dict({**cfg.to_dict(), "devices": [0, 1, 2, 3]}, check_paths=False)  # no GPUs here
    assert cfg.world_size == 2 and cfg.rank_devices(1) == [2, 3]


def test_it_trains_a_split_network_to_the_weights_of_the_whole_one(tmp_path):
    # LeNet with dropout-free layers and no shuffling differences: the same computation on the
    # same device, so the split changes nothing but where the hooks move tensors.
    dataset = make_dataset_folder(tmp_path / "ds", num_classes=3, size=8, channels=1, train=48, val=9)

    def run(name: str, devices, model_parallel: int, *, epochs: int = 1, resume: bool = False):
        cfg = make_config(
            tmp_path / name,
            dataset,
            devices=devices,
            model_parallel=model_parallel,
            epochs=epochs,
            batch_size=8,
            metrics_interval=2,
            solver={"optimizer": "sgd", "base_lr": 0.1, "momentum": 0.9},
        )
        reporter = ListReporter()
        assert train(cfg, reporter=reporter, resume=resume) == EXIT_DONE, reporter.events[-1]
        return CheckpointStore.load(CheckpointStore(tmp_path / name).latest()), reporter

    whole, _ = run("whole", ["cpu"], 1)
    split, split_events = run("split", "cpu x 2", 2)
    # Two data-parallel processes, each with the network split in two (DDP over a model on
    # several devices), against two processes of a whole network.
    data_parallel, _ = run("dp", "cpu x 2", 1)
    both, both_events = run("both", "cpu x 4", 2)
    assert whole["model"].keys() == split["model"].keys() == both["model"].keys()  # checkpoints unchanged
    for key, value in whole["model"].items():
        torch.testing.assert_close(split["model"][key], value)
        torch.testing.assert_close(both["model"][key], data_parallel["model"][key], rtol=1e-4, atol=1e-5)
    logs = [event["line"] for event in split_events.of_type("log")]
    assert any(message.startswith("model parallel: stage 1 of 2 on cpu: features.0 ..") for message in logs), logs
    assert "split over 2 devices per process" in split_events.of_type("status")[0]["message"]
    metrics = both_events.of_type("metrics")[-1]
    assert metrics["images_per_sec"] == metrics["images_per_sec_per_process"] * 2
    # A split run's checkpoint resumes whole (and the other way round): only placement differs.
    resumed, resumed_events = run("split", ["cpu"], 1, epochs=2, resume=True)
    assert resumed_events.of_type("status")[1]["resumed_from_step"] == 6 and resumed["step"] == 12
