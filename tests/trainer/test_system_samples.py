"""The sampler beside a Slurm node's trainer: it execs the trainer in its own place, samples it
into the node's own file while it lives, and leaves its exit code alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO_ROOT

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
