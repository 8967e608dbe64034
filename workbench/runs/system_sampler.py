"""`system` events: what the run's devices and its trainer processes are doing, every few seconds.

Only the GPUs this run holds are sampled (NVML, by the host index in the Device row), never the
other GPUs of the host. A simulated GPU has nothing to measure: its entry says so (`simulated:
true`) and carries the CPU use and resident memory of the trainer rank that stands for it, under
their own names (`cpu_percent`, `rss_mb`), never as GPU utilisation or GPU memory.

The local executor runs a SystemSampler beside the trainer for each attempt:

    with SystemSampler(run, pid=process.pid):
        ending = watch(run, process, EventTail(files.events), ledger)
"""

from __future__ import annotations

import json
import logging
import threading
import time

import psutil
from django.db import close_old_connections, connection

from trainer import protocol
from workbench.runs.lifecycle import run_events_append
from workbench.runs.models import Run, RunEvent
from workbench.workers.models import Device

log = logging.getLogger(__name__)

MIB = 1024 * 1024
DEFAULT_INTERVAL = 5.0
FIRST_SAMPLE_SECONDS = 1.0


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


def process_tree(pid: int | None) -> list[psutil.Process]:
    if not pid:
        return []
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
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


def rank_pids(run: Run, root_pid: int | None) -> list[int]:
    """The trainer's rank processes: processes.json when it launched several, else the trainer."""
    try:
        ranks = json.loads((run.run_dir / "processes.json").read_text())["ranks"]
        if ranks:
            return [int(pid) for pid in ranks]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return [root_pid] if root_pid else []


def latest_position(run: Run) -> dict:
    """Step, epoch and images seen of the run's latest metrics, so system points share the x axes."""
    row = (
        RunEvent.objects.filter(run_id=run.pk, kind=protocol.METRICS)
        .order_by("-seq")
        .values_list("step", "epoch", "data")
        .first()
    )
    if row is None:
        # Before the first metric the run is at its start: samples of a short run, or of any
        # run's first seconds, then still have a place on every x axis (step, epoch, images).
        return {"step": 0, "epoch": 0.0, "images_seen": 0}
    step, epoch, data = row
    return {"step": step, "epoch": epoch, "images_seen": data.get("images_seen")}


def sample_system(run: Run, *, pid: int | None = None, meter: CpuMeter | None = None) -> dict:
    """One `system` event for the run (see the module docstring and docs/formats.md)."""
    meter = meter or CpuMeter()
    pid = pid or Run.objects.values_list("trainer_pid", flat=True).get(pk=run.pk)
    tree = process_tree(pid)
    memory = psutil.virtual_memory()
    process_cpu, process_rss = tree_usage(tree, meter)
    event = {
        "type": protocol.SYSTEM,
        "time": time.time(),
        **latest_position(run),
        "host_cpu_percent": psutil.cpu_percent(interval=None),
        "host_memory_percent": memory.percent,
        "host_memory_used_mb": round((memory.total - memory.available) / MIB),
        "process_cpu_percent": process_cpu,
        "process_rss_mb": process_rss,
        "process_count": len(tree),
        "gpus": [],
    }
    gpus = list(Device.objects.filter(run_id=run.pk, kind=Device.Kind.GPU).order_by("index"))
    real = [device for device in gpus if not device.simulated]
    if real:
        event["gpus"] += nvml_samples(real, {process.pid for process in tree})
    simulated = [device for device in gpus if device.simulated]
    pids = rank_pids(run, pid)
    for rank, device in enumerate(simulated):
        rank_tree = process_tree(pids[rank]) if rank < len(pids) else []
        cpu, rss = tree_usage(rank_tree, meter, scope=f"rank{rank}")
        event["gpus"].append(
            {
                "index": device.index,
                "name": device.name,
                "simulated": True,
                "measures": f"CPU and resident memory of trainer rank {rank} (a simulated GPU has no counters)",
                "cpu_percent": cpu,
                "rss_mb": rss,
            }
        )
    return event


def nvml_samples(devices: list[Device], pids: set[int]) -> list[dict]:
    """Utilisation and memory of these GPUs (host NVML indices), and what the run's processes use."""
    try:
        import pynvml  # optional: without NVIDIA's library there is nothing to sample

        pynvml.nvmlInit()
    except Exception as error:  # no driver or library: say so in the sample rather than fail
        return [{"index": d.index, "name": d.name, "simulated": False, "error": str(error)} for d in devices]
    try:
        return [_nvml_sample(pynvml, device, pids) for device in devices]
    finally:
        pynvml.nvmlShutdown()


def _nvml_sample(pynvml, device: Device, pids: set[int]) -> dict:
    sample: dict = {"index": device.index, "name": device.name, "simulated": False}
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(device.index)
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
        rates = pynvml.nvmlDeviceGetUtilizationRates(handle)
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


class SystemSampler:
    """A thread that stores a `system` event for the run every `interval` seconds until stopped."""

    def __init__(self, run: Run, interval: float = DEFAULT_INTERVAL, *, pid: int | None = None) -> None:
        self.run = run
        self.interval = interval
        self.pid = pid
        self.meter = CpuMeter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"system-sampler-run-{run.pk}", daemon=True)

    def start(self) -> SystemSampler:
        psutil.cpu_percent(interval=None)  # the host's first reading counts from here
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def __enter__(self) -> SystemSampler:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _loop(self) -> None:
        failures = 0
        # The first sample comes soon, not one whole interval in: a run shorter than the interval
        # would otherwise have none, and every run's charts would start empty.
        wait = min(FIRST_SAMPLE_SECONDS, self.interval)
        try:
            while not self._stop.wait(wait):
                wait = self.interval
                try:
                    close_old_connections()
                    event = sample_system(self.run, pid=self.pid, meter=self.meter)
                    run_events_append(run_id=self.run.pk, events=[event])
                    self.samples += 1
                    failures = 0
                except Exception:
                    # Sampling is a side show: it must never stop or slow the run; say it once.
                    failures += 1
                    if failures == 1:
                        log.warning("run %s: system sample failed", self.run.pk, exc_info=True)
        finally:
            connection.close()
