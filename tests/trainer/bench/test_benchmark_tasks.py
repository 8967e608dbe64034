"""Benchmark mode for detection and segmentation networks (issue 22): each cell takes its task's
step (the loss a run of that task minimises, the forward its inference calls) on random boxes or
masks, or on a dataset of its task; DDP over simulated GPUs, forward-only cells and the
largest-batch finder work as for a classifier; what such a network cannot do is refused by name."""

from __future__ import annotations

import pytest
import torch

from tests.support.task_data import make_task_folder
from trainer.bench.config import benchmark_from_dict
from trainer.bench.run import run_benchmark
from trainer.bench.trial import Group, autocast_for, build, input_spec, measure_task_step
from trainer.config import ConfigError
from trainer.events import Events, ListReporter
from trainer.footprint import MiB
from trainer.protocol import CELL, EXIT_DONE, LARGEST_BATCH
from trainer.stopping import StopFlag

pytestmark = pytest.mark.slow

SEGMENTER = "lraspp_mobilenet_v3_large"
DETECTOR = "fasterrcnn_mobilenet_v3_large_320_fpn"


def measure(raw: dict) -> tuple[ListReporter, int]:
    reporter = ListReporter()
    outcome = run_benchmark(benchmark_from_dict(raw), events=Events(reporter), stop=StopFlag())
    return reporter, outcome.code


def test_it_measures_a_segmentation_net_serving_too_and_finds_its_largest_batch(tmp_path):
    raw = {
        "run_dir": str(tmp_path / "bench"),
        "networks": [SEGMENTER],
        "image_size": 32,
        "num_classes": 3,
        "batch_sizes": [2],
        "modes": ["train", "forward"],
        "warmup_steps": 0,
        "steps": 1,
        "memory_capacity_mb": 58,
        "find_largest": True,
        "find_limit": 16,
    }
    reporter, code = measure(raw)
    assert code == EXIT_DONE
    cells = {c["mode"]: c for c in reporter.of_type(CELL)}
    assert sorted(cells) == ["forward", "train"]
    assert all(c["status"] == "ok" and c["images_per_sec"] > 0 for c in cells.values()), cells
    assert cells["forward"]["peak_memory_bytes"] < cells["train"]["peak_memory_bytes"]  # nothing saved for backward
    # The finder's batch is the largest whose training step (the task's loss on random masks) fits.
    (found,) = (c["batch_size"] for c in reporter.of_type(LARGEST_BATCH))
    cfg = benchmark_from_dict(raw)
    spec = input_spec(cfg)
    built = build(cfg, Group(SEGMENTER, "fp32", "train", 1), spec, [torch.device("cpu")], 1, 1)
    autocast = autocast_for(torch.device("cpu"), "fp32")

    def need(batch: int) -> int:
        return max(measure_task_step(built, spec, batch, autocast, train=True, cfg=cfg))

    assert 1 <= found < 16
    assert need(found) <= 58 * MiB < need(found + 1)


def test_it_measures_a_detector_on_two_gpus_from_a_detection_dataset_and_refuses_a_classifier_there(tmp_path):
    folder = make_task_folder(tmp_path / "boxes", task="detection", size=64, train=4, val=2)
    raw = {
        "run_dir": str(tmp_path / "bench"),
        "networks": [DETECTOR],
        "data": str(folder),
        "num_workers": 0,
        "devices": ["cpu", "cpu"],
        "gpu_counts": [2],
        "batch_sizes": [2],
        "warmup_steps": 0,
        "steps": 1,
    }
    reporter, code = measure(raw)
    assert code == EXIT_DONE
    (cell,) = reporter.of_type(CELL)
    assert cell["status"] == "ok" and cell["data"] == "dataset" and cell["images_per_sec"] > 0, cell
    # A classifier on it: refused before any cell (the folder's task), and by the cell if the
    # folder changed after the check.
    lenet = {**raw, "networks": ["lenet"], "gpu_counts": [1]}
    with pytest.raises(ConfigError, match="lenet is not a detection network; choose one of"):
        benchmark_from_dict(lenet)
    reporter = ListReporter()
    run_benchmark(benchmark_from_dict(lenet, check_paths=False), events=Events(reporter), stop=StopFlag())
    (cell,) = reporter.of_type(CELL)
    assert cell["status"] == "error"
    assert "lenet is not a detection network; choose one of" in cell["message"]


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"model_parallel": 2, "gpu_counts": [2]}, "model_parallel", "trains whole on each GPU"),
        ({"image_size": 16}, "image_size", "needs images of at least 32x32"),
    ],
)
def test_it_refuses_what_a_detector_cannot_do_naming_the_field(tmp_path, fields, field, words):
    raw = {"run_dir": str(tmp_path), "networks": [DETECTOR], "devices": ["cpu", "cpu"], **fields}
    with pytest.raises(ConfigError) as refusal:
        benchmark_from_dict(raw)
    assert refusal.value.field == field and words in refusal.value.message
