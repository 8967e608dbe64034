"""Precision, memory format, compile flag, gradient accumulation, batch-size finder, events, CLI."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trainer.batch_size import find_batch_size, search_batch_size
from trainer.checkpoint import CheckpointStore
from trainer.config import ConfigError, config_from_dict
from trainer.events import Events, JsonLinesReporter, ListReporter, Reporter
from trainer.protocol import EXIT_DONE
from trainer.run import train

from .conftest import make_config

REPO = Path(__file__).resolve().parents[2]


def test_it_trains_in_bf16_with_channels_last(tmp_path, gray8):
    cfg = make_config(tmp_path / "run", gray8, precision="bf16", channels_last=True, epochs=1)
    reporter = ListReporter()
    assert train(cfg, reporter=reporter) == EXIT_DONE
    assert all(m["loss"] == m["loss"] for m in reporter.of_type("metrics"))  # finite, not NaN
    state = CheckpointStore.load(CheckpointStore(tmp_path / "run").latest())
    assert state["scaler"] == {} or not state["scaler"].get("_enabled", False)  # no GradScaler off fp16


def test_it_accepts_and_validates_the_compile_flag(tmp_path, gray8):
    raw = {"run_dir": str(tmp_path), "data": {"dataset": str(gray8)}}
    assert config_from_dict({**raw, "compile": True}).compile is True
    with pytest.raises(ConfigError, match="^compile: must be true or false"):
        config_from_dict({**raw, "compile": "yes"})


def test_it_accumulates_gradients_to_the_same_weights(tmp_path, gray8):
    def final(name, accum):
        cfg = make_config(
            tmp_path / name,
            gray8,
            grad_accum=accum,
            epochs=1,
            solver={"optimizer": "sgd", "base_lr": 0.1, "momentum": 0.0},
        )
        assert train(cfg, reporter=ListReporter()) == EXIT_DONE
        return CheckpointStore.load(CheckpointStore(tmp_path / name).latest())["model"]

    whole, halves = final("whole", 1), final("halves", 2)
    for key in whole:
        torch.testing.assert_close(halves[key], whole[key], rtol=1e-4, atol=1e-5)


def test_it_searches_for_the_largest_batch_that_fits():
    tried = []

    def fits(batch):
        tried.append(batch)
        return batch <= 37

    assert search_batch_size(fits, limit=4096) == 37
    assert tried[:7] == [1, 2, 4, 8, 16, 32, 64]
    assert len(tried) <= 14
    assert search_batch_size(lambda b: True, limit=100) == 100
    assert search_batch_size(lambda b: False) == 0


def test_it_finds_a_batch_size_for_a_config_and_records_it(tmp_path, gray8):
    cfg = make_config(tmp_path / "run", gray8)
    assert find_batch_size(cfg, limit=16) == 16  # the CPU fits any small batch: the search hits the limit
    assert json.loads((tmp_path / "run" / "batch_size.json").read_text())["max_batch_size"] == 16


def test_it_writes_events_as_json_lines():
    stream = io.StringIO()
    reporter = JsonLinesReporter(stream)
    assert isinstance(reporter, Reporter) and isinstance(ListReporter(), Reporter)
    events = Events(reporter)
    events.metrics(step=1, loss=float("nan"))
    events.status("running", "ok")
    events.progress(50.0, 10.0, 10.0)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [e["type"] for e in lines] == ["metrics", "status", "progress"]
    assert lines[0]["loss"] is None and isinstance(lines[0]["time"], float)
    assert lines[1] == {**lines[1], "state": "running", "message": "ok"}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainer", *args],
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_previews_the_lr_curve_and_checks_configs_from_the_command_line(tmp_path, gray8):
    layers = [{"type": "flatten"}, {"type": "linear"}]
    config = {
        "run_dir": str(tmp_path / "run"),
        "data": {"dataset": str(gray8)},
        "network": "custom",
        "custom_layers": layers,
        "batch_size": 8,
        "solver": {"lr_policy": "exp", "gamma": 0.5, "base_lr": 1.0},
    }
    (tmp_path / "c.json").write_text(json.dumps(config))
    curve = json.loads(_cli("lr-curve", "--config", str(tmp_path / "c.json"), "--total-steps", "4").stdout)
    assert curve == [{"step": 0, "lr": 1.0}, {"step": 1, "lr": 0.5}, {"step": 2, "lr": 0.25}, {"step": 3, "lr": 0.125}]
    checked = json.loads(_cli("check", "--config", str(tmp_path / "c.json")).stdout)
    assert checked["layers"][-1] == {"index": 1, "type": "linear", "shape": [3]}
    (tmp_path / "bad.json").write_text(json.dumps({**config, "network": "resnet19"}))
    bad = _cli("train", "--config", str(tmp_path / "bad.json"), "--events", str(tmp_path / "ev.jsonl"))
    assert bad.returncode == 2 and "network: 'resnet19' is not one of" in bad.stderr
    final = json.loads((tmp_path / "ev.jsonl").read_text().splitlines()[-1])
    assert final["state"] == "failed" and final["exit_code"] == 2


@pytest.mark.slow  # ~25 s on 2 CPU cores: inductor compiles LeNet's forward and backward
def test_it_trains_a_compiled_model_and_saves_plain_weights(tmp_path, gray8):
    cfg = make_config(tmp_path / "run", gray8, compile=True, epochs=1)
    reporter = ListReporter()
    assert train(cfg, reporter=reporter) == EXIT_DONE, reporter.events[-1]
    state = CheckpointStore.load(CheckpointStore(tmp_path / "run").latest())
    assert not any(key.startswith("_orig_mod.") for key in state["model"])  # loadable without compile


class _NeedsMemory(torch.nn.Module):
    """Raises the CPU allocator's OOM above a batch of 5, like a device that is full."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(64, 3)

    def forward(self, x):
        if x.shape[0] > 5:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes")
        return self.linear(x.flatten(1))


def test_it_finds_the_largest_batch_below_an_out_of_memory_error():
    from trainer.batch_size import train_step_fits
    from trainer.memory import is_oom

    fits = train_step_fits(_NeedsMemory(), (1, 8, 8), 3, torch.device("cpu"))
    assert search_batch_size(fits, limit=64) == 5
    assert is_oom(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not is_oom(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))


def test_it_trains_without_a_validation_split(tmp_path):
    from tests.support.trainer_data import make_dataset_folder

    dataset = make_dataset_folder(tmp_path / "ds", train=16, val=0)
    reporter = ListReporter()
    assert train(make_config(tmp_path / "run", dataset), reporter=reporter) == EXIT_DONE
    assert reporter.of_type("validation") == [] and reporter.events[-1]["state"] == "done"
    assert CheckpointStore(tmp_path / "run").latest() is not None
