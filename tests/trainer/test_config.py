"""Config validation: every error names the field and the allowed values."""

from __future__ import annotations

import json

import pytest

from trainer.config import ConfigError, config_from_dict, load_config, parse_devices, plain_number
from trainer.events import ListReporter
from trainer.run import train

from .conftest import make_config


def _raw(tmp_path, dataset, **extra):
    return {"run_dir": str(tmp_path / "run"), "data": {"dataset": str(dataset)}, **extra}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"network": "resnet19"}, "network: 'resnet19' is not one of lenet, alexnet, googlenet"),
        ({"precision": "fp8"}, "precision: 'fp8' is not one of fp32, bf16, fp16"),
        ({"precision": "fp16"}, "precision: 'fp16' needs CUDA devices"),
        ({"solver": {"lr_policy": "linear"}}, "solver.lr_policy: 'linear' is not one of fixed, step"),
        ({"solver": {"optimizer": "lbfgs"}}, "solver.optimizer: 'lbfgs' is not one of sgd, nesterov"),
        ({"solver": {"base_lr": -1}}, "solver.base_lr: -1 must be a positive number"),
        ({"solver": {"step_size": 150}}, "solver.step_size: 150 must be between 0 and 100"),
        ({"solver": {"momentom": 0.9}}, "solver.momentom: unknown field"),
        ({"batch_size": 0}, "batch_size: 0 must be a positive integer"),
        ({"batch_size": 7, "devices": "cpu x 2"}, "batch_size: 7 is not divisible by the 2 processes"),
        ({"batch_size": 8, "grad_accum": 3}, "grad_accum: per-process batch 8 is not divisible by grad_accum 3"),
        ({"devices": ["gpu0"]}, "devices: 'gpu0' is not 'cpu' or a CUDA index"),
        ({"devices": [0, 0]}, "devices: a CUDA device appears twice"),
        ({"network": "custom"}, "custom_layers: network 'custom' needs a non-empty list"),
        ({"epochs": "ten"}, "epochs: 'ten' must be a positive number"),
        ({"data": {"mean_subtraction": "median"}}, "data.mean_subtraction: 'median' is not one of image, pixel, none"),
        ({"learning_rate": 0.1}, "learning_rate: unknown field (known: "),
    ],
)
def test_it_names_the_field_and_allowed_values(tmp_path, gray8, extra, message):
    raw = _raw(tmp_path, gray8)
    for key, value in extra.items():
        raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    with pytest.raises(ConfigError) as info:
        config_from_dict(raw)
    assert message in str(info.value)


def test_it_parses_device_lists():
    assert parse_devices("cpu x 2") == ["cpu", "cpu"]
    assert parse_devices(["cpu"]) == ["cpu"]
    assert parse_devices([0, "1", "cuda:3"]) == [0, 1, 3]
    assert parse_devices("0,1") == [0, 1]
    assert parse_devices("cuda x 4") == [0, 1, 2, 3]
    with pytest.raises(ConfigError, match="mixes CPU and CUDA"):
        parse_devices(["cpu", 0])


def test_it_reports_missing_dataset_and_bad_json(tmp_path):
    with pytest.raises(ConfigError, match="data.dataset: folder '/nope' not found"):
        config_from_dict({"run_dir": str(tmp_path), "data": {"dataset": "/nope"}})
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(tmp_path / "bad.json")
    (tmp_path / "ok.json").write_text(json.dumps({"run_dir": "r", "data": {"dataset": "d"}}))
    assert load_config(tmp_path / "ok.json", check_paths=False).network == "lenet"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"network": "alexnet"}, "network: alexnet needs images of at least 63x63, dataset is 8x8"),
        ({"network": "vgg16"}, "network: vgg16 needs images of at least 32x32, dataset is 8x8"),
        ({"network": "vit_b_16"}, "vit_b_16 needs square images whose side is a multiple of 16"),
        ({"data": {"crop_size": 12}}, "data.crop_size: 12 is larger than the dataset images (8x8)"),
        ({"batch_size": 64}, "batch_size: 64 is larger than the 48 training images"),
        (
            {
                "network": "custom",
                "custom_layers": [
                    {"type": "conv2d", "out_channels": 4, "kernel_size": 9},
                    {"type": "flatten"},
                    {"type": "linear"},
                ],
            },
            "layer 0 (conv2d)",
        ),
    ],
)
def test_it_refuses_a_network_or_size_that_cannot_work_before_training(tmp_path, gray8, overrides, message):
    reporter = ListReporter()
    code = train(make_config(tmp_path / "run", gray8, **overrides), reporter=reporter)
    assert code == 2
    final = reporter.events[-1]
    assert final["type"] == "status" and final["state"] == "failed" and final["exit_code"] == 2
    assert message in final["message"]
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.parametrize(
    ("value", "text"),
    [(1 << 20, "1048576"), (1048576.0, "1048576"), (0.05, "0.05"), (1e-4, "0.0001"), (1e-8, "0.00000001"),
     (33.333333333, "33.3333"), (2.5e20, "250000000000000000000"), (-3, "-3")],
)  # fmt: skip
def test_it_writes_numbers_in_messages_plainly(value, text):
    assert plain_number(value) == text
