"""`system` events: what the run's devices and its trainer processes are doing, every few seconds.

Only the GPUs this run holds are sampled (NVML, by the host index in the Device row), never the
other GPUs of the host. A simulated GPU has nothing to measure: its entry says so (`simulated:
true`) and carries the CPU use and resident memory of the trainer rank that stands for it, under
their own names (`cpu_percent`, `rss_mb`), never as GPU utilisation or GPU memory. The measuring
is the trainer's (trainer/system_samples.py), which each node of a Slurm job runs beside its
trainer; here it runs in the worker, which knows the run's devices.

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
from trainer.system_samples import (
    CpuMeter,
    GpuTarget,
    host_usage,
    nvml_samples,
    process_tree,
    simulated_gpu,
)
from workbench.runs.attempts.ingest import latest_position
from workbench.runs.lifecycle import run_events_append
from workbench.runs.models import Run
from workbench.workers.models import Device

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 5.0
FIRST_SAMPLE_SECONDS = 1.0


def rank_pids(run: Run, root_pid: int | None) -> list[int]:
    """The trainer's rank processes: processes.json when it launched several, else the trainer."""
    try:
        ranks = json.loads((run.run_dir / "processes.json").read_text())["ranks"]
        if ranks:
            return [int(pid) for pid in ranks]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return [root_pid] if root_pid else []


def sample_system(run: Run, *, pid: int | None = None, meter: CpuMeter | None = None) -> dict:
    """One `system` event for the run (see the module docstring and docs/formats.md)."""
    meter = meter or CpuMeter()
    pid = pid or Run.objects.values_list("trainer_pid", flat=True).get(pk=run.pk)
    tree = process_tree(pid)
    event = {
        "type": protocol.SYSTEM,
        "time": time.time(),
        **latest_position(run),
        **host_usage(tree, meter),
        "gpus": [],
    }
    gpus = list(Device.objects.filter(run_id=run.pk, kind=Device.Kind.GPU).order_by("index"))
    real = [GpuTarget(device.index, device.name, device.index) for device in gpus if not device.simulated]
    if real:
        event["gpus"] += nvml_samples(real, {process.pid for process in tree})
    simulated = [device for device in gpus if device.simulated]
    pids = rank_pids(run, pid)
    for rank, device in enumerate(simulated):
        rank_tree = process_tree(pids[rank]) if rank < len(pids) else []
        event["gpus"].append(simulated_gpu(device.index, device.name, rank, rank_tree, meter))
    return event


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
