"""Worker hosts and their devices, as their heartbeats last announced them.

A device row also carries its holder (`Device.run`): allocation is a conditional update of this
row, so no GPU can be given to two runs (see workbench/runs/scheduler.py). The reference is by
name only; this app imports nothing of the runs app.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone


class WorkerHost(models.Model):
    """A machine running a Celery worker, as last announced by its heartbeat."""

    hostname = models.CharField(max_length=255, unique=True)
    # The worker's own queue: training tasks for runs placed on this host go there.
    queue = models.CharField(max_length=300, blank=True)
    # What the worker sees: [{"kind": "gpu"|"cpu", "index": int, "name": str, ...}, ...]
    devices = models.JSONField(default=list)
    # Changes each time the worker process starts: a run launched under another boot is orphaned.
    boot_id = models.UUIDField(default=uuid.uuid4)
    simulated = models.BooleanField(default=False)
    started_at = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "runs_workerhost"  # made by the runs app, which owned hosts before workers did
        ordering = ["hostname"]

    def __str__(self) -> str:
        return self.hostname

    @property
    def is_online(self) -> bool:
        timeout = timedelta(seconds=settings.WORKER_TIMEOUT_SECONDS)
        return self.last_seen >= timezone.now() - timeout

    @property
    def seconds_since_seen(self) -> float:
        return (timezone.now() - self.last_seen).total_seconds()


class Device(models.Model):
    """One allocatable device of a host: a GPU, or the host's CPU. `run` is who holds it."""

    class Kind(models.TextChoices):
        GPU = "gpu"
        CPU = "cpu"

    host = models.ForeignKey(WorkerHost, on_delete=models.CASCADE, related_name="device_rows")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    index = models.PositiveIntegerField()
    name = models.CharField(max_length=200)
    memory_total_mb = models.PositiveIntegerField(default=0)
    memory_used_mb = models.PositiveIntegerField(default=0)
    utilization_percent = models.FloatField(null=True, blank=True)
    temperature_c = models.FloatField(null=True, blank=True)
    power_watts = models.FloatField(null=True, blank=True)
    simulated = models.BooleanField(default=False)
    # The allocation itself: set and cleared only by conditional updates (services.allocation).
    run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="devices")
    # Held by something that is not a run (a benchmark: "benchmark:<id>"), which needs the device
    # to itself; the runs' scheduler leaves such a device alone. Set and cleared by conditional
    # updates like `run` (workbench/benchmarks/scheduling.py).
    reserved_by = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        db_table = "runs_device"  # made by the runs app, which owned devices before workers did
        ordering = ["host__hostname", "kind", "index"]
        constraints = [models.UniqueConstraint(fields=["host", "kind", "index"], name="unique_device_per_host")]

    def __str__(self) -> str:
        return f"{self.host.hostname}:{self.label}"

    @property
    def label(self) -> str:
        return "CPU" if self.kind == self.Kind.CPU else f"GPU {self.index}"
