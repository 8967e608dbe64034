"""A benchmark: a queued job that measures a table of cells (images/s per GPU count and batch
size) on GPUs it holds to itself, and the cells it measured."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import models
from django.utils import timezone

from workbench.core.groups import benchmark_group_name
from workbench.core.ownership import OwnedModel

# The time a benchmark may hold its GPUs unless it asks for another (validators.py bounds it).
DEFAULT_TIME_BUDGET_MINUTES = 60


class Benchmark(OwnedModel):
    class State(models.TextChoices):
        QUEUED = "queued"
        WAITING = "waiting"  # for its GPUs; `wait_reason` says why
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"

    PENDING_STATES = (State.QUEUED, State.WAITING)
    ACTIVE_STATES = (State.QUEUED, State.WAITING, State.RUNNING)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="benchmarks")
    # The project it is shared with (docs/design.md, "Projects and roles"); null: its owner's alone.
    project = models.ForeignKey(
        "projects.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="benchmarks"
    )
    name = models.CharField(max_length=200)
    # What was asked, as validators.validate_benchmark_request cleaned it (networks, gpus, ...).
    request = models.JSONField(default=dict)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    reason = models.CharField(max_length=500, blank=True)  # the last transition's words
    wait_reason = models.CharField(max_length=300, blank=True)
    # When the one queue expects it to start (workbench/runs/scheduler), as for a run.
    estimated_start = models.DateTimeField(null=True, blank=True)
    host = models.ForeignKey("workers.WorkerHost", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    host_boot_id = models.UUIDField(null=True, blank=True)
    # When its runner's watch last said it still follows the trainer (workers.inventory.lost_worker).
    watched_at = models.DateTimeField(null=True, blank=True)
    device_labels = models.JSONField(default=list)  # "sim0@host: GPU 0", for the page
    launched = models.BooleanField(default=False)  # claimed by a worker's task
    cancel_requested = models.BooleanField(default=False)
    progress = models.FloatField(default=0.0)
    largest_batches = models.JSONField(default=list)  # the `largest_batch` events
    queued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-queued_at", "-pk"]

    def __str__(self) -> str:
        return f"benchmark #{self.pk} {self.name}"

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES

    @property
    def group_name(self) -> str:
        return benchmark_group_name(self.pk)

    @property
    def reservation(self) -> str:
        """What its devices' `reserved_by` reads while it holds them."""
        return f"benchmark:{self.pk}"

    @property
    def time_budget_seconds(self) -> float:
        """How long it may hold its GPUs: its runner stops it there (requests stored before the
        budget existed have the default)."""
        return 60.0 * float(self.request.get("time_budget_minutes") or DEFAULT_TIME_BUDGET_MINUTES)

    @property
    def on_simulated_gpus(self) -> bool:
        """Measured on simulated GPUs: CPU processes sharing the host's cores, not GPUs."""
        return any(label.endswith("(simulated)") for label in self.device_labels)

    @property
    def gpus_needed(self) -> int:
        return max(self.request.get("gpus") or [1])

    @property
    def run_dir(self) -> Path:
        return Path(settings.DATA_DIR) / "benchmarks" / str(self.pk)


class BenchmarkCell(OwnedModel):
    """One measured cell, as the trainer's `cell` event reported it (`data`)."""

    owner_field = "benchmark__owner"

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="cells")
    seq = models.PositiveIntegerField()
    network = models.CharField(max_length=40)
    gpus = models.PositiveIntegerField()
    batch_size = models.PositiveIntegerField()
    status = models.CharField(max_length=8)  # ok | oom | error
    data = models.JSONField(default=dict)

    class Meta:
        ordering = ["benchmark", "seq"]
        constraints = [models.UniqueConstraint(fields=["benchmark", "seq"], name="unique_cell_seq")]

    def __str__(self) -> str:
        return f"{self.network} x{self.gpus} batch {self.batch_size}: {self.status}"
