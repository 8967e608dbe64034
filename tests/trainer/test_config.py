"""Config validation: every error names the field and the allowed values."""

from __future__ import annotations

import datetime
import json
import math

import pytest

from trainer.config import (
    DECAY_POLICIES,
    RANGES,
    ConfigError,
    Range,
    TrainConfig,
    config_from_dict,
    default_of,
    load_config,
    parse_devices,
    plain_number,
    settings_of,
)
from trainer.events import ListReporter
from trainer.run import train
from trainer.solver import lr_at, lr_curve
from trainer.solver import total_steps as solver_total_steps

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


# What an attacker (or a typo) sends into a number: each must be refused, naming the field, with a
# ConfigError and nothing else (a 400-digit int made math.isfinite raise OverflowError).
EXTREMES = [10**400, -(10**400), 1e308, -1e308, float("inf"), float("nan"), True, False, "1", "NaN", [], {}, None]


def _set(raw: dict, name: str, value) -> dict:
    owner, _, leaf = name.rpartition(".")
    raw = {**raw, owner: {**raw.get(owner, {}), leaf: value}} if owner else {**raw, leaf: value}
    return raw


def _bounds(rng: Range) -> list:
    return [value for value in (rng.low, rng.high) if not (rng.above_low and value == rng.low)]


@pytest.mark.parametrize("name", sorted(RANGES))
def test_it_refuses_every_extreme_in_every_number_naming_the_field(name):
    rng = RANGES[name]
    outside = [rng.high + (1 if rng.integer else rng.high * 1e-9 + 1e-9), rng.low - 1]
    if rng.above_low:
        outside.append(rng.low)
    if rng.integer:
        outside.append(rng.low + 0.5)
    base = {"run_dir": "r", "data": {"dataset": "d"}, "batch_size": 1}
    for value in [*EXTREMES, *outside]:
        if value is None and name in ("solver.grad_clip_norm", "data.crop_size"):
            continue  # null turns clipping and the crop off
        with pytest.raises(ConfigError) as refused:
            config_from_dict(_set(base, name, value), check_paths=False)
        assert refused.value.field == name, (name, value, str(refused.value))
        assert len(refused.value.message) < 200


@pytest.mark.parametrize("name", sorted(RANGES))
def test_it_launches_with_every_bound_it_accepts(name):
    """The arithmetic a run does at launch and on every step (step counts, intervals, the LR
    schedule, the collectives' timeout) holds at each bound the validator lets through."""
    for value in _bounds(RANGES[name]):
        raw = _set({"run_dir": "r", "data": {"dataset": "d"}, "batch_size": 1}, name, value)
        if name in ("batch_size", "grad_accum"):
            raw = {**raw, "batch_size": value, "grad_accum": 1 if name == "batch_size" else value}
        if name == "model_parallel" or name == "nodes":
            continue  # need as many devices: the device checks cover them (test_parallel, test_cluster)
        if name == "early_stopping_patience" and value:
            raw["val_interval"] = 1.0
        if name in ("freeze_backbone_epochs", "backbone_lr_mult"):
            raw["pretrained"] = "weights.pt"  # fine-tuning fields need weights to fine-tune
        for policy in ("step", "multistep", "exp", "inv", "poly", "sigmoid", "cosine", "onecycle"):
            try:
                cfg = config_from_dict(
                    {**raw, "solver": {**raw.get("solver", {}), "lr_policy": policy}}, check_paths=False
                )
            except ConfigError as refused:  # a growing gamma, refused for the decaying policies
                assert refused.field == "solver.gamma" and policy in DECAY_POLICIES
                continue
            steps_per_epoch = 1_000_000 // cfg.batch_size or 1
            total = solver_total_steps(cfg.epochs, 1_000_000, cfg.batch_size)
            assert round(cfg.val_interval * steps_per_epoch) >= 0 <= round(cfg.snapshot_interval * steps_per_epoch)
            datetime.timedelta(seconds=cfg.dist_timeout_s)
            lrs = [lr for _, lr in lr_curve(cfg, total, points=50)] + [lr_at(cfg.solver, total - 1, total)]
            assert all(math.isfinite(lr) for lr in lrs), (name, value, policy)


def test_it_refuses_a_gamma_that_grows_the_rate_without_bound():
    raw = {"run_dir": "r", "data": {"dataset": "d"}, "solver": {"lr_policy": "exp", "gamma": 1.5}}
    with pytest.raises(ConfigError, match="solver.gamma: 1.5 is above 1") as refused:
        config_from_dict(raw, check_paths=False)
    assert refused.value.field == "solver.gamma"
    raw["solver"]["lr_policy"] = "inv"  # (1 + gamma * it) ** -power: any gamma is fine
    assert config_from_dict(raw, check_paths=False).solver.gamma == 1.5


def test_it_refuses_device_lists_no_host_has_before_building_them():
    with pytest.raises(ConfigError, match="devices: 1000000000 devices: give 1 to 64"):
        parse_devices("cpu x 1000000000")
    with pytest.raises(ConfigError, match="a 401-digit number is not a CUDA index"):
        parse_devices([10**400])


def test_it_stores_every_setting_sent_or_defaulted_without_what_the_launcher_fills_in():
    sent = config_from_dict({"run_dir": "r", "data": {"dataset": "d", "num_workers": 0}, "devices": "cpu x 2",
                             "batch_size": 8, "solver": {"base_lr": 0.1}}, check_paths=False)  # fmt: skip
    settings = settings_of(sent)
    defaults = settings_of(TrainConfig())
    assert set(settings) == set(defaults) and not set(settings) & {"run_dir", "devices", "nodes", "network"}
    assert "dataset" not in settings["data"] and "pretrained" not in settings
    assert settings["batch_size"] == 8 and settings["solver"]["base_lr"] == 0.1 and settings["data"]["num_workers"] == 0
    assert settings["solver"]["lr_policy"] == default_of("solver.lr_policy") == "fixed"
    assert json.loads(json.dumps(settings)) == settings  # JSON as stored: betas a list, not a tuple
    sent.pretrained = "weights.pt"
    assert settings_of(sent)["pretrained"] == "weights.pt"
    default_of("solver.step_values").append(99)  # a copy: the default itself is untouched
    assert default_of("solver.step_values") == [50.0, 75.0]
