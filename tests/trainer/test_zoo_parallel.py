"""A zoo network (timm's, trainer/zoo.py) under data parallel (two gloo processes on the CPU) and
in benchmark mode: measured where it fits, refused before anything is queued where the images'
side cannot fit its patch grid or its least side.

And compiled: torch.compile with its default backend (inductor) took 110 s for one epoch of
timm/resnet18d on 8x8 images on this 2-CPU machine, most of it inductor's C++ build, against the
suite's budget; the test below compiles with dynamo's "eager" backend instead, which captures the
zoo network's graphs as the trainer's loop runs them (what fails on a network dynamo cannot trace)
and leaves out only inductor's code generation."""

from __future__ import annotations

import pytest
import torch

from tests.support.trainer_data import make_dataset_folder
from trainer.bench.config import benchmark_from_dict
from trainer.bench.run import run_benchmark
from trainer.checkpoint import CheckpointStore
from trainer.config import ConfigError
from trainer.events import Events, ListReporter
from trainer.protocol import CELL, EXIT_DONE
from trainer.run import train
from trainer.stopping import StopFlag

from .conftest import make_config

ZOO_NET = "timm/resnet18d"  # the smallest classic of the zoo's families, BatchNorm included


def test_it_trains_a_zoo_network_with_two_processes(tmp_path):
    # Two steps: most of the time is the two processes starting (torch and timm imported in each).
    dataset = make_dataset_folder(tmp_path / "ds", num_classes=2, size=8, channels=1, train=16, val=4)
    cfg = make_config(tmp_path / "run", dataset, network=ZOO_NET, devices="cpu x 2", epochs=1, batch_size=8)
    reporter = ListReporter()
    assert train(cfg, reporter=reporter) == EXIT_DONE, reporter.events[-1]
    metrics = reporter.of_type("metrics")
    assert [m["step"] for m in metrics] == [1, 2]  # 16 images, a global batch of 8: 4 per process
    assert metrics[-1]["images_per_sec"] == metrics[-1]["images_per_sec_per_process"] * 2
    assert "val_loss" in reporter.of_type("validation")[-1]
    state = CheckpointStore.load(CheckpointStore(tmp_path / "run").latest())
    # Saved without DDP's wrapper: the names timm gives, which inference and exports load.
    assert state["config"]["network"] == ZOO_NET and "conv1.0.weight" in state["model"]


def test_it_trains_a_compiled_zoo_network(tmp_path, gray8, monkeypatch):
    compile_as_configured = torch.compile
    compiled: list[str] = []

    def eager_compile(model, **options):
        compiled.append(type(model).__name__)
        return compile_as_configured(model, backend="eager", **options)

    monkeypatch.setattr(torch, "compile", eager_compile)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    cfg = make_config(tmp_path / "run", gray8, network=ZOO_NET, compile=True, epochs=1, batch_size=8)
    reporter = ListReporter()
    try:
        assert train(cfg, reporter=reporter) == EXIT_DONE, reporter.events[-1]
    finally:
        torch._dynamo.reset()  # no compiled frames left behind for the next test in this process
    assert compiled == ["ResNet"]  # timm's model, compiled by the trainer
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # dynamo captured it (no silent fallback)
    state = CheckpointStore.load(CheckpointStore(tmp_path / "run").latest())
    assert "conv1.0.weight" in state["model"]  # saved under timm's names, not the compiled wrapper's


def bench(tmp_path, network: str, side: int) -> dict:
    return {
        "run_dir": str(tmp_path / "bench"), "networks": [network], "image_size": side, "channels": 3,
        "num_classes": 10, "devices": ["cpu"], "gpu_counts": [1], "batch_sizes": [2], "warmup_steps": 1, "steps": 1,
    }  # fmt: skip


def test_it_measures_a_zoo_network_in_benchmark_mode(tmp_path):
    reporter = ListReporter()
    outcome = run_benchmark(benchmark_from_dict(bench(tmp_path, ZOO_NET, 32)), events=Events(reporter), stop=StopFlag())
    assert outcome.code == EXIT_DONE
    [cell] = reporter.of_type(CELL)
    assert cell["network"] == ZOO_NET and cell["status"] == "ok" and cell["images_per_sec"] > 0


@pytest.mark.parametrize(
    ("network", "side", "message"),
    [
        ("timm/vit_tiny_patch16_224", 28, "needs sides that are multiples of 16 (its patch grid): use 16 or 32"),
        ("timm/swin_tiny_patch4_window7_224", 16, "needs sides that are multiples of 32 (its patch grid): use 32"),
        ("timm/convnext_atto", 16, "needs images of at least 32x32: use 32 or more"),
    ],
)
def test_it_refuses_a_side_a_zoo_network_cannot_take_before_the_benchmark_starts(tmp_path, network, side, message):
    # Before this, every cell failed once the benchmark held its GPUs, in a run's words
    # ("dataset is 28x28; set data.crop_size"), which a benchmark request has not.
    with pytest.raises(ConfigError) as refused:
        benchmark_from_dict(bench(tmp_path, network, side))
    assert refused.value.field == "image_size" and str(refused.value) == f"image_size: {network} {message}"
    benchmark_from_dict(bench(tmp_path, network, 32))  # the side it names is taken
