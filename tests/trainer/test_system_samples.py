"""The sampler beside a Slurm node's trainer: it execs the trainer in its own place, samples it
into the node's own file while it lives, and leaves its exit code alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

from tests.conftest import REPO_ROOT
from trainer.cluster import NodePlacement
from trainer.system_samples import CpuMeter, NodeSampler

# A stand-in trainer: one busy rank process for a second and a half, then the stopped exit code.
BUSY = "import time\\nend = time.time() + 1.5\\nwhile time.time() < end: pass"
TRAINER = (
    "import json, os, subprocess, sys, time\n"
    f"rank = subprocess.Popen([sys.executable, '-c', '{BUSY}'])\n"
    "open('processes.node1.json', 'w').write(json.dumps({'launcher': os.getpid(), 'ranks': [rank.pid]}))\n"
    "print('trainer pid', os.getpid(), flush=True)\n"
    "rank.wait()\n"
    "sys.exit(3)\n"
)


def test_it_samples_a_nodes_trainer_into_the_nodes_own_file_and_keeps_its_exit_code(tmp_path):
    # The second node of a job, as Slurm and the batch script describe it to each task.
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "SLURM_NODEID": "1",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURMD_NODENAME": "n2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29999",
    }
    argv = [sys.executable, "-m", "trainer.system_samples", "--every", "0.2", "--gpus", "1", "--simulated"]
    argv += ["--out", "system-1.jsonl", "--", sys.executable, "-c", TRAINER]
    started = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = started.communicate(timeout=60)

    assert started.returncode == 3, err
    # The trainer is the process that was started (its pid, its exit code): the sampler forked, then exec'd it.
    assert f"trainer pid {started.pid}" in out
    assert not (tmp_path / "system-1.jsonl").exists()  # the first node's file is the first node's
    samples = [json.loads(line) for line in (tmp_path / "system-1.node1.jsonl").read_text().splitlines()]
    assert len(samples) >= 3
    for sample in samples:
        assert (sample["type"], sample["node"], sample["node_rank"]) == ("system", "n2", 1)
        assert "step" not in sample  # the workbench places it at the run's latest step
        # Node 1's host fields are its own series; its GPU is the job's second (global numbering).
        assert "host_cpu_percent" not in sample and sample["node1_process_count"] >= 1
        (gpu,) = sample["gpus"]
        assert (gpu["index"], gpu["node"], gpu["simulated"]) == (1, "n2", True)
    assert max(sample["node1_process_count"] for sample in samples) == 2  # the trainer and its rank, not the sampler
    assert max(sample["gpus"][0]["cpu_percent"] for sample in samples[1:]) > 5  # the busy rank


def test_it_reads_only_the_runs_gpus_through_nvml_by_the_hosts_numbers(tmp_path, monkeypatch):
    # This machine has no NVIDIA driver: a stand-in pynvml records which GPUs were asked for. A
    # local run on the host's GPU 2 sees only it (CUDA_VISIBLE_DEVICES) and charts it as GPU 2.
    asked = []
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    fake = types.SimpleNamespace(
        NVMLError=RuntimeError,
        NVML_TEMPERATURE_GPU=0,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda index: asked.append(index) or index,
        nvmlDeviceGetMemoryInfo=lambda handle: types.SimpleNamespace(used=40 * 2**30, total=141 * 2**30),
        nvmlDeviceGetUtilizationRates=lambda handle: types.SimpleNamespace(gpu=97, memory=60),
        nvmlDeviceGetTemperature=lambda handle, sensor: 61,
        nvmlDeviceGetPowerUsage=lambda handle: 612_000,
        nvmlDeviceGetComputeRunningProcesses=lambda handle: [
            types.SimpleNamespace(pid=trainer.pid, usedGpuMemory=2**30)
        ],
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    sampler = NodeSampler(trainer.pid, NodePlacement(node_name="gpu-host"), 1, False, tmp_path, (2,), ("NVIDIA H200",))
    try:
        (gpu,) = sampler.sample(CpuMeter())["gpus"]
    finally:
        trainer.kill()
        trainer.wait()
    assert asked == [2]
    assert gpu == {
        "index": 2, "name": "NVIDIA H200", "simulated": False, "utilization_percent": 97.0,
        "memory_utilization_percent": 60.0, "memory_used_mb": 40 * 1024, "memory_total_mb": 141 * 1024,
        "temperature_c": 61, "power_watts": 612.0, "process_memory_mb": 1024, "node": "gpu-host",
    }  # fmt: skip
