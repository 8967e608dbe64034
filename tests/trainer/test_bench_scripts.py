"""bench/gpu.sh refuses quickly without CUDA; its Python part runs end to end at a tiny size."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: gpu.sh would run for real")
def test_it_makes_gpu_sh_fail_fast_without_cuda():
    result = subprocess.run(["bash", str(REPO / "bench" / "gpu.sh")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "no CUDA GPU is visible" in result.stderr and "--size tiny" in result.stderr


def test_it_runs_the_gpu_benchmark_code_at_a_tiny_size_on_the_cpu(tmp_path):
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu_trainer.py"), "--size", "tiny", "--json", str(tmp_path / "r.json")],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| batch / GPU | 1 GPU | 2 GPUs |" in result.stdout  # the benchmark mode's own tables
    cells = json.loads((tmp_path / "r.json").read_text())
    assert sorted((c["data"], c["gpus"], c["precision"]) for c in cells) == [
        ("dataset", 1, "fp32"),
        ("dataset", 2, "fp32"),
        ("synthetic", 1, "fp32"),
        ("synthetic", 2, "fp32"),
        ("synthetic, split over 2", 2, "fp32"),
    ]
    assert all(c["status"] == "ok" and c["images_per_sec"] > 0 for c in cells), cells


def test_it_runs_the_recipe_pipeline_benchmark_at_a_tiny_size(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("bench_recipes", REPO / "bench" / "bench_recipes.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    argv = ["bench_recipes.py", "--images", "8", "--side", "32", "--out", "24", "--batch", "4"]
    monkeypatch.setattr(sys, "argv", argv)
    threads = torch.get_num_threads()
    try:
        assert bench.main() == 0
    finally:
        torch.set_num_threads(threads)
    printed = capsys.readouterr().out
    assert "| torchvision ClassificationPresetTrain (per PIL image) | 8 |" in printed
    assert "| ours (uint8 batch, trainer/augment.py) | 8 |" in printed and "ratio (ours / reference):" in printed
    assert "ours per stage, CPU ms per image: crop " in printed
