"""bench/gpu.sh refuses quickly without CUDA; its Python part runs end to end at a tiny size."""

from __future__ import annotations

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
    assert "| data | devices | precision | batch/process | images/s |" in result.stdout
    rows = json.loads((tmp_path / "r.json").read_text())
    assert [(r["data"], r["devices"], r["precision"]) for r in rows] == [
        ("synthetic", 1, "fp32"),
        ("lmdb", 1, "fp32"),
        ("lmdb", 2, "fp32"),
        ("synthetic, split over 2", 2, "fp32"),
    ]
    assert all(r.get("images_per_sec", 0) > 0 for r in rows), rows
