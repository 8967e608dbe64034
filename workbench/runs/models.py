from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone


class WorkerHost(models.Model):
    """A machine running a Celery worker, as last announced by its heartbeat."""

    hostname = models.CharField(max_length=255, unique=True)
    # What the worker sees: [{"kind": "gpu"|"cpu", "index": int, "name": str, ...}, ...]
    devices = models.JSONField(default=list)
    started_at = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)

    class Meta:
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


class Run(models.Model):
    """A training run: a dataset, a network, a solver and the devices it trains on."""

    class State(models.TextChoices):
        QUEUED = "queued"
        WAITING = "waiting"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        ABORTED = "aborted"
        INTERRUPTED = "interrupted"

    ACTIVE_STATES = (State.QUEUED, State.WAITING, State.RUNNING, State.INTERRUPTED)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    name = models.CharField(max_length=200)
    dataset = models.ForeignKey("datasets.Dataset", on_delete=models.PROTECT, related_name="runs")
    network = models.CharField(max_length=64)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    # Fraction of the planned training done, 0..1.
    progress = models.FloatField(default=0.0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    @property
    def group_name(self) -> str:
        return f"run-{self.pk}"

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES
