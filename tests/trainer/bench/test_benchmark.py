"""Benchmark mode in the trainer: a grid of short timed trials on simulated GPUs (gloo processes
on the CPU), OOM cells under a simulated memory capacity, the largest-batch finder, model
parallel groups, forward-only cells, real data, and the command line's events."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.support.trainer_data import make_dataset_folder
from trainer.bench.config import benchmark_from_dict, parse_layout
from trainer.bench.run import run_benchmark
from trainer.bench.table import compare, derive, markdown, to_csv
from trainer.bench.trial import autocast_for
from trainer.config import ConfigError
from trainer.events import Events, ListReporter
from trainer.footprint import MiB, measure_step
from trainer.networks import InputSpec, build_model
from trainer.protocol import CELL, EXIT_CONFIG, EXIT_DONE, LARGEST_BATCH, STATUS, Outcome
from trainer.stopping import StopFlag


def lenet_config(tmp_path: Path, **overrides) -> dict:
    return {
        "run_dir": str(tmp_path / "bench"),
        "networks": ["lenet"],
        "image_size": 28,
        "channels": 1,
        "num_classes": 10,
        "devices": ["cpu", "cpu"],
        "gpu_counts": [1, 2],
        "batch_sizes": [8, 16],
        "warmup_steps": 1,
        "steps": 3,
        **overrides,
    }


def measure(raw: dict) -> tuple[list[dict], ListReporter, Outcome]:
    reporter = ListReporter()
    outcome = run_benchmark(benchmark_from_dict(raw), events=Events(reporter), stop=StopFlag())
    return reporter.of_type(CELL), reporter, outcome


def lenet_need(batch: int) -> int:
    """The bytes a LeNet 28x28 training step needs, as the benchmark measures them."""
    model = build_model("lenet", InputSpec(1, 28, 28, 10))
    model.train()
    return max(measure_step(model, torch.zeros(batch, 1, 28, 28), autocast_for(torch.device("cpu"), "fp32")))


def test_it_measures_a_two_by_two_grid_with_speedup_and_efficiency(tmp_path):
    cells, _, outcome = measure(lenet_config(tmp_path))
    assert outcome.code == EXIT_DONE
    assert sorted((c["gpus"], c["batch_size"]) for c in cells) == [(1, 8), (1, 16), (2, 8), (2, 16)]
    assert all(c["status"] == "ok" and c["images_per_sec"] > 0 and c["step_time_s"] > 0 for c in cells)
    assert all(c["peak_memory_bytes"] > 0 and c["data_wait_share"] == 0.0 for c in cells)
    for cell in derive(cells):
        one = next(c for c in cells if c["gpus"] == 1 and c["batch_size"] == cell["batch_size"])
        assert cell["speedup"] == pytest.approx(cell["images_per_sec"] / one["images_per_sec"])
        assert cell["efficiency"] == pytest.approx(cell["speedup"] / cell["gpus"])
        assert cell["images_per_sec_per_gpu"] == pytest.approx(cell["images_per_sec"] / cell["gpus"])
    rows = to_csv(cells).splitlines()
    assert rows[0].startswith("network,precision,mode,data,gpus,batch_size,status,images_per_sec")
    assert len(rows) == 5
    assert "| batch / GPU | 1 GPU | 2 GPUs |" in markdown(cells)


def test_it_records_oom_under_a_simulated_capacity_and_runs_the_next_cells(tmp_path):
    capacity_mb = (lenet_need(16) + lenet_need(64)) // 2 // MiB + 1
    assert lenet_need(16) < capacity_mb * MiB < lenet_need(64)
    raw = lenet_config(
        tmp_path, gpu_counts=[1], batch_sizes=[16, 64, 8], memory_capacity_mb=capacity_mb, find_largest=True
    )
    cells, reporter, outcome = measure(raw)
    assert outcome.code == EXIT_DONE
    by_batch = {c["batch_size"]: c for c in cells}
    assert by_batch[64]["status"] == "oom"
    assert by_batch[64]["memory_needed_bytes"] == pytest.approx(lenet_need(64), rel=0.01)
    assert "batch 64 needs" in by_batch[64]["message"] and f"{capacity_mb:,} MiB" in by_batch[64]["message"]
    assert by_batch[8]["status"] == by_batch[16]["status"] == "ok"  # the one after the OOM ran too
    (found,) = reporter.of_type(LARGEST_BATCH)
    largest = found["batch_size"]
    assert 16 <= largest < 64
    assert lenet_need(largest) <= capacity_mb * MiB < lenet_need(largest + 1)
    assert "1 out of memory" in outcome.message


def test_it_runs_a_model_parallel_layout_on_two_simulated_gpus(tmp_path):
    stages, groups = parse_layout("2x1")
    raw = lenet_config(tmp_path, model_parallel=stages, gpu_counts=[stages * groups], batch_sizes=[8])
    cells, _, outcome = measure(raw)
    assert outcome.code == EXIT_DONE
    (cell,) = cells
    assert cell["status"] == "ok" and cell["stages"] == 2 and cell["processes"] == 1
    assert len(cell["stage_memory_bytes"]) == 2 and all(m > 0 for m in cell["stage_memory_bytes"])


def test_it_measures_forward_only_beside_training_on_real_data(tmp_path):
    folder = make_dataset_folder(tmp_path / "ds", num_classes=3, size=16, channels=1, train=64, val=0)
    raw = lenet_config(
        tmp_path, data=str(folder), gpu_counts=[1], batch_sizes=[8], modes=["train", "forward"], num_workers=0
    )
    cells, _, outcome = measure(raw)
    assert outcome.code == EXIT_DONE
    assert {c["mode"] for c in cells} == {"train", "forward"}
    assert all(c["status"] == "ok" and c["data"] == "dataset" and c["data_wait_share"] > 0 for c in cells)


def test_it_compares_two_benchmarks_cell_by_cell():
    left = [{"network": "lenet", "precision": "fp32", "mode": "train", "data": "synthetic", "gpus": 1,
             "batch_size": 8, "status": "ok", "images_per_sec": 100.0}]  # fmt: skip
    right = [{**left[0], "images_per_sec": 150.0}]
    (pair,) = compare(left, right)
    assert pair["ratio"] == pytest.approx(100 / 150)  # read "left vs right": left is 0.67x as fast


def test_it_refuses_a_bad_benchmark_config_naming_the_field(tmp_path):
    with pytest.raises(ConfigError) as error:
        benchmark_from_dict(lenet_config(tmp_path, gpu_counts=[1, 4]))
    assert error.value.field == "gpu_counts" and "2 device(s) granted" in str(error.value)
    with pytest.raises(ConfigError) as error:
        benchmark_from_dict(lenet_config(tmp_path, model_parallel=2, gpu_counts=[1, 2]))
    assert error.value.field == "gpu_counts"
    with pytest.raises(ConfigError):
        parse_layout("2by2")


def test_it_writes_cells_as_json_lines_from_the_command_line(tmp_path):
    config = tmp_path / "bench.json"
    config.write_text(json.dumps(lenet_config(tmp_path, devices=["cpu"], gpu_counts=[1], batch_sizes=[4])))
    events = tmp_path / "events.jsonl"
    argv = [sys.executable, "-m", "trainer", "benchmark", "--config", str(config), "--events", str(events)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == EXIT_DONE, done.stderr
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert [e["type"] for e in lines if e["type"] in (CELL, STATUS)] == [STATUS, STATUS, CELL, STATUS]
    assert lines[-1]["state"] == "done" and lines[-1]["exit_code"] == EXIT_DONE
    config.write_text(json.dumps(lenet_config(tmp_path, networks=["nosuchnet"])))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == EXIT_CONFIG and "networks" in events.read_text().splitlines()[-1]
