"""Intra-op threads per training process: its share of the cores it may use.

torch starts every process with a thread per core. A node's ranks, each with its loader workers
beside it, then run several times more busy threads than the node has cores: an operator's
OpenMP threads wait for each other at its end, and one that the kernel preempted holds all the
others. torchrun sets one thread per process when it starts several, for this reason. On a busy
2-core machine a step ran 10-20x slower with torch's default threads than with one (issue 33;
bench/bench_threads.py measures ours against torch's default, docs/benchmarks.md).
"""

from __future__ import annotations

import logging
import os

import torch

from trainer.config import TrainConfig

log = logging.getLogger("trainer")


def usable_cores() -> int:
    """The cores this process may run on: its affinity (taskset, Slurm's and a container's
    cpusets), not the machine's count, which os.cpu_count() and torch's default read."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on macOS
        return os.cpu_count() or 1


def thread_share(cores: int, processes: int, loader_workers: int) -> int:
    """Intra-op threads of one of `processes` training processes on `cores`, each with
    `loader_workers` beside it; a worker is one thread (torch's DataLoader sets it), and every
    process gets at least one."""
    return max(1, cores // (processes * (1 + loader_workers)))


def set_thread_share(cfg: TrainConfig, *, rank: int) -> int:
    """Set this process's intra-op threads to its share of the node's usable cores (its
    processes: `cfg.local_processes`, each with `cfg.data.num_workers` loader workers) and return
    it. An OMP_NUM_THREADS set for the trainer is its operator's choice and stays, as under torchrun."""
    if os.environ.get("OMP_NUM_THREADS"):
        return torch.get_num_threads()
    cores = usable_cores()
    threads = thread_share(cores, cfg.local_processes, cfg.data.num_workers)
    torch.set_num_threads(threads)
    if rank == 0:
        log.info(
            "%d intra-op thread(s) per process: %d usable core(s), %d process(es) with %d loader worker(s) each",
            threads,
            cores,
            cfg.local_processes,
            cfg.data.num_workers,
        )
    return threads
