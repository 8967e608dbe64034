"""Where this trainer process sits in a run over several nodes.

A run over N nodes starts one trainer per node (Slurm: `srun --ntasks-per-node=1`), each of which
starts its node's ranks. They meet through torch.distributed's TCP rendezvous on the first node:
the batch script exports its address and a port derived from the job id; Slurm tells each task
its node's index. Global ranks are node-major (node k holds ranks k*L .. k*L+L-1 for L local
processes), so a data-parallel run over 2 nodes x 2 processes shards the data exactly as one
node with 4 processes does, and reaches the same weights.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from trainer import protocol
from trainer.config import ConfigError

# Set by the workbench's batch script (workbench/runs/slurm_jobs.py) for every task.
MASTER_ADDR = "MASTER_ADDR"
MASTER_PORT = "MASTER_PORT"


@dataclass(frozen=True)
class NodePlacement:
    node_rank: int = 0
    nodes: int = 1
    master_addr: str = "127.0.0.1"
    master_port: int | None = None  # None: a free local port (one node, nobody else to tell)
    node_name: str = "localhost"  # for messages ("rank 3 on node n2 was killed")

    @property
    def reports(self) -> bool:
        """Only the first node's launcher reports the run's events (its rank 0 is global rank 0)."""
        return self.node_rank == 0

    def rank_offset(self, local_processes: int) -> int:
        return self.node_rank * local_processes

    def events_path(self, path: str) -> str:
        """The first node writes the run's events file; the others write their own outcome beside
        it (`events-3.node1.jsonl`), so a rank that died on node 1 is named by node 1."""
        if self.node_rank == 0 or path == "-":
            return path
        return protocol.node_events_name(path, self.node_rank)


def placement_from_environment(env: Mapping[str, str] | None = None) -> NodePlacement:
    """The placement Slurm and the batch script give this task; ConfigError if incomplete."""
    env = os.environ if env is None else env
    try:
        node_rank = int(env.get("SLURM_NODEID", "0"))
        nodes = int(env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or "1")
        port = int(env[MASTER_PORT]) if env.get(MASTER_PORT) else None
    except ValueError as exc:
        raise ConfigError(f"bad node placement in the environment: {exc}") from None
    if nodes > 1 and (not env.get(MASTER_ADDR) or port is None):
        raise ConfigError(f"a run over {nodes} nodes needs {MASTER_ADDR} and {MASTER_PORT} in the environment")
    if not 0 <= node_rank < nodes:
        raise ConfigError(f"node {node_rank} is not one of the job's {nodes} nodes")
    return NodePlacement(
        node_rank=node_rank,
        nodes=nodes,
        master_addr=env.get(MASTER_ADDR) or "127.0.0.1",
        master_port=port,
        node_name=env.get("SLURMD_NODENAME") or f"#{node_rank}",
    )


def check_nodes(cfg_nodes: int, placement: NodePlacement) -> None:
    if cfg_nodes != placement.nodes:
        raise ConfigError(f"the config is for {cfg_nodes} node(s) but the job has {placement.nodes}", field="nodes")
