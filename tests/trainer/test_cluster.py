"""One run over two "nodes": two `python -m trainer train --placement-from-environment` launchers
(as srun starts them, one per node) of two gloo processes each, and a rank that dies on the
second node ends the run naming it. That two nodes of two reach the weights of one node with four
processes is tests/workbench/runs/test_slurm.py's, through a real Slurm cluster (one end-to-end
test of the path, not two)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.trainer_data import make_dataset_folder
from tests.support.waiting import wait_until
from trainer.cluster import NodePlacement, placement_from_environment
from trainer.config import ConfigError
from trainer.distributed import free_port
from trainer.protocol import EXIT_FAILED, EXIT_OK

from .conftest import make_config

REPO = Path(__file__).resolve().parents[2]


def start_nodes(tmp_path: Path, cfg, *, nodes: int = 2) -> list[subprocess.Popen]:
    cfg.save(tmp_path / "run.json")
    port = free_port()
    argv = [sys.executable, "-m", "trainer", "train", "--config", str(tmp_path / "run.json")]
    argv += ["--events", str(tmp_path / "events.jsonl"), "--placement-from-environment"]
    return [
        subprocess.Popen(
            argv,
            env={
                **os.environ,
                "PYTHONPATH": str(REPO),
                "SLURM_NODEID": str(node),
                "SLURM_JOB_NUM_NODES": str(nodes),
                "SLURMD_NODENAME": f"n{node + 1}",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
            },
            cwd=tmp_path,
            start_new_session=True,
        )
        for node in range(nodes)
    ]


def read_events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_it_ends_the_run_naming_a_rank_that_died_on_another_node(tmp_path):
    dataset = make_dataset_folder(tmp_path / "ds", num_classes=3, size=8, channels=1, train=400, val=9)
    cfg = make_config(tmp_path, dataset, devices="cpu x 2", nodes=2, epochs=50, batch_size=8, metrics_interval=1)
    launchers = start_nodes(tmp_path, cfg)
    try:
        node1 = tmp_path / "processes.node1.json"
        events = tmp_path / "events.jsonl"
        wait_until(
            lambda: node1.exists() and events.exists() and '"type":"metrics"' in events.read_text(),
            what="training to start (a first metrics event and the second node's processes)",
            timeout=240,
        )
        victim = json.loads(node1.read_text())["ranks"][1]  # global rank 3
        os.kill(victim, signal.SIGKILL)
        assert launchers[1].wait(timeout=120) == EXIT_FAILED
        second = read_events(tmp_path / "events.node1.jsonl")[-1]
        assert second["state"] == "failed"
        assert second["message"].startswith("rank 3 on node n2") and "SIGKILL" in second["message"]
        # The first node's ranks lose their peer in the next collective and stop too.
        assert launchers[0].wait(timeout=cfg.dist_timeout_s + 120) not in EXIT_OK
    finally:
        for launcher in launchers:
            if launcher.poll() is None:
                os.killpg(launcher.pid, signal.SIGKILL)


def test_it_reads_its_node_from_slurm_and_the_batch_script():
    env = {"SLURM_NODEID": "1", "SLURM_JOB_NUM_NODES": "2", "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29511"}
    placement = placement_from_environment({**env, "SLURMD_NODENAME": "gpu07"})
    assert placement == NodePlacement(
        node_rank=1, nodes=2, master_addr="10.0.0.5", master_port=29511, node_name="gpu07"
    )
    assert placement.rank_offset(4) == 4 and not placement.reports
    assert placement.events_path("/shared/runs/7/events-2.jsonl") == "/shared/runs/7/events-2.node1.jsonl"
    with pytest.raises(ConfigError, match="needs MASTER_ADDR and MASTER_PORT"):
        placement_from_environment({"SLURM_NODEID": "0", "SLURM_JOB_NUM_NODES": "2"})
    with pytest.raises(ConfigError, match="not one of the job's 2 nodes"):
        placement_from_environment({**env, "SLURM_NODEID": "2"})
