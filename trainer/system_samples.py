"""`system` samples: what a node's GPUs, its host and the trainer's processes are doing.

One sampler, beside the trainer, for both executors: the local executor starts its trainer
through this module as each node of a Slurm job does (its batch script), and the worker or the
Slurm follower stores what it writes as it stores the trainer's own events:

    python -m trainer.system_samples --every 5 --gpus 2 --out system-3.jsonl -- python -m trainer train ...

It forks the sampler and execs the trainer in its own place, so the trainer stays the process its
executor started (its pid, its signals, its exit code). The sampler ignores the stop signals (the trainer
saves its checkpoint meanwhile), samples the trainer's process tree every `--every` seconds, and
ends when the trainer is gone. Each node writes its own file (node k > 0: `system-3.node<k>.jsonl`,
protocol.system_events_name): appends of two hosts to one file on shared storage may interleave.

A sample names its node. Its GPUs are numbered across the job (node k holds k*G .. k*G+G-1, as
the global ranks are), or by the host's own numbers where the executor gives them (`--gpu-ids`:
a local run on GPUs 2 and 3 charts GPUs 2 and 3), so the run's GPU chart shows every GPU once;
the host fields of node k > 0 carry a `node<k>_` prefix, so the run's host chart (the first
node's) never mixes two hosts. The workbench adds the run's step, epoch and images seen when it
stores a sample.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from trainer import protocol
from trainer.cluster import NodePlacement, placement_from_environment
from trainer.config import ConfigError

MIB = 1024 * 1024
FIRST_SAMPLE_SECONDS = 1.0  # a run shorter than the interval still has a sample
GONE_CHECK_SECONDS = 0.5
HOST_FIELDS = (
    "host_cpu_percent",
    "host_memory_percent",
    "host_memory_used_mb",
    "process_cpu_percent",
    "process_rss_mb",
    "process_count",
)


class CpuMeter:
    """CPU percent of processes between two calls (the first call: the average since each started).

    psutil's own cpu_percent() needs a priming call and shares its state; this keeps one
    (cpu time, wall time) pair per process, so several samplers never disturb each other.
    """

    def __init__(self) -> None:
        self._last: dict[tuple[str, int, float], tuple[float, float]] = {}

    def percent(self, process: psutil.Process, scope: str = "") -> float:
        """`scope` keeps separate readings when one process is measured twice per sample."""
        with process.oneshot():
            times = process.cpu_times()
            created = process.create_time()
        busy = times.user + times.system
        now = time.time()
        key = (scope, process.pid, created)
        previous_busy, previous_at = self._last.get(key, (0.0, created))
        self._last[key] = (busy, now)
        return max(0.0, 100.0 * (busy - previous_busy) / max(now - previous_at, 1e-6))


def process_tree(pid: int | None, *, leave_out: int | None = None) -> list[psutil.Process]:
    if not pid:
        return []
    try:
        root = psutil.Process(pid)
        return [p for p in [root, *root.children(recursive=True)] if p.pid != leave_out]
    except psutil.Error:
        return []


def tree_usage(processes: list[psutil.Process], meter: CpuMeter, scope: str = "") -> tuple[float, float]:
    """(CPU percent summed over the processes, resident memory in MiB)."""
    cpu = rss = 0.0
    for process in processes:
        try:
            cpu += meter.percent(process, scope)
            rss += process.memory_info().rss / MIB
        except psutil.Error:
            continue  # ended between the listing and now
    return round(cpu, 1), round(rss, 1)


def host_usage(tree: list[psutil.Process], meter: CpuMeter) -> dict[str, Any]:
    """The host's CPU and memory, and the trainer's whole process tree (HOST_FIELDS)."""
    memory = psutil.virtual_memory()
    process_cpu, process_rss = tree_usage(tree, meter)
    return {
        "host_cpu_percent": psutil.cpu_percent(interval=None),
        "host_memory_percent": memory.percent,
        "host_memory_used_mb": round((memory.total - memory.available) / MIB),
        "process_cpu_percent": process_cpu,
        "process_rss_mb": process_rss,
        "process_count": len(tree),
    }


def simulated_gpu(index: int, name: str, rank: int, rank_tree: list[psutil.Process], meter: CpuMeter) -> dict:
    """A simulated GPU has no counters: the CPU and memory of the rank standing for it, so named."""
    cpu, rss = tree_usage(rank_tree, meter, scope=f"rank{rank}")
    return {
        "index": index,
        "name": name,
        "simulated": True,
        "measures": f"CPU and resident memory of trainer rank {rank} (a simulated GPU has no counters)",
        "cpu_percent": cpu,
        "rss_mb": rss,
    }


# ----------------------------------------------------------------------------------- NVML


@dataclass(frozen=True)
class GpuTarget:
    index: int  # the GPU's number in the run's charts
    name: str  # "" to ask NVML
    nvml: int | str  # NVML's index of it on this host, or its UUID (CUDA_VISIBLE_DEVICES may give either)


def nvml_samples(targets: list[GpuTarget], pids: set[int]) -> list[dict]:
    """Utilisation and memory of these GPUs, and what the given processes use of them."""
    try:
        import pynvml  # optional: without NVIDIA's library there is nothing to sample

        pynvml.nvmlInit()
    except Exception as error:  # no driver or library: say so in the sample rather than fail
        return [{"index": t.index, "name": t.name, "simulated": False, "error": str(error)} for t in targets]
    try:
        return [_nvml_sample(pynvml, target, pids) for target in targets]
    finally:
        pynvml.nvmlShutdown()


def _nvml_sample(pynvml, target: GpuTarget, pids: set[int]) -> dict:
    sample: dict = {"index": target.index, "name": target.name, "simulated": False}
    try:
        if isinstance(target.nvml, str):
            handle = pynvml.nvmlDeviceGetHandleByUUID(target.nvml)
        else:
            handle = pynvml.nvmlDeviceGetHandleByIndex(target.nvml)
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
        rates = pynvml.nvmlDeviceGetUtilizationRates(handle)
        if not target.name:
            name = pynvml.nvmlDeviceGetName(handle)
            sample["name"] = name.decode() if isinstance(name, bytes) else name
    except pynvml.NVMLError as error:
        return {**sample, "error": str(error)}
    sample.update(
        utilization_percent=float(rates.gpu),
        memory_utilization_percent=float(rates.memory),
        memory_used_mb=round(memory.used / MIB),
        memory_total_mb=round(memory.total / MIB),
    )
    for key, read in (
        ("temperature_c", lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
        ("power_watts", lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0),
        ("process_memory_mb", lambda: _process_memory_mb(pynvml, handle, pids)),
    ):
        try:
            value = read()
        except pynvml.NVMLError:
            continue
        if value is not None:
            sample[key] = value
    return sample


def _process_memory_mb(pynvml, handle, pids: set[int]) -> float | None:
    # The run's own share of the GPU's memory (other users' processes on a shared GPU excluded).
    # None when the PIDs are not visible (another PID namespace): the total still tells the story.
    used = [p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle) if p.pid in pids]
    if not used:
        return None
    return round(sum(u or 0 for u in used) / MIB)


def visible_gpus(env: dict[str, str] | None = None) -> list[int | str]:
    """The GPUs this process may use as NVML knows them: CUDA_VISIBLE_DEVICES (indexes or UUIDs)."""
    env = os.environ if env is None else env
    entries = [entry.strip() for entry in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
    return [int(entry) if entry.isdigit() else entry for entry in entries]


# ----------------------------------------------------------------------------------- one node


@dataclass(frozen=True)
class NodeSampler:
    """What one node's sampler measures: the trainer's tree and the node's share of the job's GPUs."""

    trainer_pid: int
    placement: NodePlacement
    gpus: int  # GPUs per node
    simulated: bool  # the GPUs are placeholders (a test cluster): each rank's CPU stands for one
    folder: Path  # the run folder: each node's launcher lists its ranks there (processes*.json)
    gpu_ids: tuple[int, ...] = ()  # the GPUs' numbers in the run's charts; () numbers them across the job
    gpu_names: tuple[str, ...] = ()  # their names as the workbench knows them; () asks NVML (or says "simulated")

    def gpu_id(self, local: int) -> int:
        return self.gpu_ids[local] if local < len(self.gpu_ids) else self.placement.node_rank * self.gpus + local

    def gpu_name(self, local: int) -> str:
        if local < len(self.gpu_names):
            return self.gpu_names[local]
        return f"simulated GPU {local} of {self.placement.node_name}" if self.simulated else ""

    def ranks(self) -> list[int]:
        """This node's rank processes (the launcher's list), else the trainer alone."""
        name = "processes.json" if self.placement.node_rank == 0 else f"processes.node{self.placement.node_rank}.json"
        try:
            ranks = json.loads((self.folder / name).read_text())["ranks"]
            if ranks:
                return [int(pid) for pid in ranks]
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return [self.trainer_pid]

    def sample(self, meter: CpuMeter) -> dict:
        tree = process_tree(self.trainer_pid, leave_out=os.getpid())
        host = host_usage(tree, meter)
        node_rank = self.placement.node_rank
        if node_rank > 0:
            host = {f"node{node_rank}_{key}": value for key, value in host.items()}
        first = node_rank * self.gpus
        if self.simulated:
            ranks = self.ranks()
            gpus = [
                simulated_gpu(
                    self.gpu_id(local),
                    self.gpu_name(local),
                    first + local,
                    process_tree(ranks[local]) if local < len(ranks) else [],
                    meter,
                )
                for local in range(self.gpus)
            ]
        else:
            visible = visible_gpus() or list(range(self.gpus))
            targets = [
                GpuTarget(self.gpu_id(local), self.gpu_name(local), visible[local])
                for local in range(min(self.gpus, len(visible)))
            ]
            gpus = nvml_samples(targets, {process.pid for process in tree}) if targets else []
        for gpu in gpus:
            gpu["node"] = self.placement.node_name
        return {
            "type": protocol.SYSTEM,
            "time": time.time(),
            "node": self.placement.node_name,
            "node_rank": node_rank,
            **host,
            "gpus": gpus,
        }


def sample_until_gone(sampler: NodeSampler, out: Path, every: float) -> None:
    """Appends a sample to `out` every `every` seconds while the trainer lives (its parent)."""
    meter = CpuMeter()
    psutil.cpu_percent(interval=None)  # the host's first reading counts from here
    due = time.monotonic() + min(FIRST_SAMPLE_SECONDS, every)
    with out.open("a", encoding="utf-8", buffering=1) as stream:
        while os.getppid() == sampler.trainer_pid:
            if time.monotonic() < due:
                time.sleep(min(GONE_CHECK_SECONDS, max(0.0, due - time.monotonic())))
                continue
            due += every
            try:
                stream.write(json.dumps(sampler.sample(meter), separators=(",", ":")) + "\n")
            except Exception as error:  # a side show: it must never stop the run; one line says why
                stream.write(json.dumps({"type": protocol.LOG, "time": time.time(), "line": str(error)}) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.system_samples", description=__doc__.split("\n")[0])
    parser.add_argument("--every", type=float, required=True, help="seconds between samples (0: none)")
    parser.add_argument("--gpus", type=int, default=0, help="GPUs per node")
    parser.add_argument("--simulated", action="store_true", help="the GPUs are placeholders (a test cluster)")
    parser.add_argument("--gpu-ids", default="", help="the GPUs' numbers in the run's charts, comma-separated")
    parser.add_argument("--gpu-name", action="append", default=[], help="a GPU's name, once per GPU, in order")
    parser.add_argument("--node-name", default="", help="the node's name in the samples (default: Slurm's)")
    parser.add_argument("--out", required=True, help="the first node's file; node k writes its own beside it")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the trainer's command line")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the trainer's command after --")
    try:
        placement = placement_from_environment()
    except ConfigError:
        placement = None  # the trainer reports a bad placement itself; nothing to sample meanwhile
    if placement is not None and args.node_name:
        placement = dataclasses.replace(placement, node_name=args.node_name)
    if placement is not None and args.every > 0:
        trainer_pid = os.getpid()
        out = Path(protocol.node_events_name(args.out, placement.node_rank) if placement.node_rank else args.out)
        gpu_ids = tuple(int(part) for part in args.gpu_ids.split(",") if part.strip())
        sampler = NodeSampler(
            trainer_pid, placement, args.gpus, args.simulated, out.resolve().parent, gpu_ids, tuple(args.gpu_name)
        )
        if os.fork() == 0:
            for stop_signal in (signal.SIGTERM, signal.SIGINT):
                signal.signal(stop_signal, signal.SIG_IGN)
            try:
                sample_until_gone(sampler, out, args.every)
            finally:
                os._exit(0)
    sys.stdout.flush()
    os.execvp(command[0], command)
    return 0  # not reached: exec replaces this process


if __name__ == "__main__":
    sys.exit(main())
