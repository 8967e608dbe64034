from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import models
from django.utils import timezone

from trainer import protocol
from workbench.core.groups import run_group_name
from workbench.core.ownership import OwnedModel
from workbench.runs.devices import DeviceRequest
from workbench.slurm.commands import ACTIVE_STATES as SLURM_ACTIVE_STATES


class Run(OwnedModel):
    """A training run: a dataset, a network, a solver and the devices it trains on."""

    class State(models.TextChoices):
        QUEUED = "queued"
        WAITING = "waiting"
        RUNNING = "running"
        PAUSED = "paused"
        DONE = "done"
        FAILED = "failed"
        ABORTED = "aborted"
        INTERRUPTED = "interrupted"
        PRUNED = "pruned"  # stopped early, with a checkpoint, by its search's pruner (workbench/searches/)

    class Executor(models.TextChoices):
        LOCAL = "local"  # the workbench's own queue and its workers' GPUs
        SLURM = "slurm"  # a batch job on the Slurm cluster (workbench/runs/executors/slurm/)

    class StopRequest(models.TextChoices):
        NONE = ""
        ABORT = "abort"
        PAUSE = "pause"
        PRUNE = "prune"  # by its search: the trial is worse than the others at its rung

    # States the scheduler may start (interrupted runs resume from their checkpoint).
    PENDING_STATES = (State.QUEUED, State.WAITING, State.INTERRUPTED)
    ACTIVE_STATES = (State.QUEUED, State.WAITING, State.RUNNING, State.INTERRUPTED)
    FINISHED_STATES = (State.DONE, State.FAILED, State.ABORTED, State.PRUNED)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    # The project it is shared with (docs/design.md, "Projects and roles"); null: its owner's alone.
    project = models.ForeignKey(
        "projects.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    name = models.CharField(max_length=200)
    dataset = models.ForeignKey("datasets.Dataset", on_delete=models.PROTECT, related_name="runs")
    # The version of the dataset it trains on (datasets.DatasetVersion); null: the build, for a
    # run submitted before its dataset was built (or before versions existed).
    dataset_version = models.ForeignKey(
        "datasets.DatasetVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    # A folder under DATA_DIR it trains from instead of its version's, written by the app that
    # made the run: a label check's fold (workbench/labelchecks/folds.py). Blank for any other run.
    data_folder = models.CharField(max_length=300, blank=True)
    network = models.CharField(max_length=64)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    # Higher starts first; users get 0, staff may raise or lower it.
    priority = models.IntegerField(default=0)
    # DeviceRequest.to_dict() (workbench/runs/devices.py); read it through `devices_wanted`.
    device_request = models.JSONField(default=dict)
    # The trainer's config (trainer.config.TrainConfig fields) without run_dir, dataset and devices,
    # which the launch fills in.
    config = models.JSONField(default=dict)
    executor = models.CharField(max_length=8, choices=Executor.choices, default=Executor.LOCAL)
    # Nodes the run spans (Slurm only); the device request is per node.
    nodes = models.PositiveSmallIntegerField(default=1)
    # The Slurm job of the current attempt, and its state as last seen ("" before submission).
    slurm_job_id = models.CharField(max_length=32, blank=True)
    slurm_state = models.CharField(max_length=24, blank=True)
    host = models.ForeignKey(
        "workers.WorkerHost", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    host_boot_id = models.UUIDField(null=True, blank=True)
    # Each launch is one attempt; a task only starts a trainer for the attempt it was queued for.
    attempt = models.PositiveIntegerField(default=0)
    launched_attempt = models.PositiveIntegerField(default=0)
    stop_request = models.CharField(max_length=8, choices=StopRequest.choices, blank=True, default="")
    # Why the stop was asked for, in words, where the asker knows more than the state says (a
    # search's pruner: "val loss 0.91 at epoch 2 is worse than 2 of the 3 trials at that rung").
    stop_reason = models.CharField(max_length=300, blank=True)
    trainer_pid = models.IntegerField(null=True, blank=True)
    # When the watch of the current attempt last said it still follows the trainer: a run whose
    # worker's heartbeat is late but whose watch is not keeps running (workers.inventory.lost_worker).
    watched_at = models.DateTimeField(null=True, blank=True)
    # Why the run waits, in plain words, as the scheduler last saw it; and its estimated start.
    # A run holding the devices it needs reads HOLDER_WORDS in the stored text, and is kept in
    # `wait_holder`: whether a viewer may see its name is decided at read time (wait_reason_for).
    wait_reason = models.CharField(max_length=300, blank=True)
    wait_holder = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    estimated_start = models.DateTimeField(null=True, blank=True)
    # Fraction of the planned training done, 0..1, and the trainer's estimate of the time left.
    progress = models.FloatField(default=0.0)
    eta_seconds = models.FloatField(null=True, blank=True)
    # The last event sequence number stored for this run (see RunEvent).
    last_seq = models.PositiveBigIntegerField(default=0)
    error = models.TextField(blank=True)
    # The owner's own words about the run, and the sweep it belongs to (runs created together
    # from comma-separated learning rates / batch sizes share it; blank for a single run).
    notes = models.TextField(blank=True)
    sweep = models.CharField(max_length=64, blank=True, db_index=True)
    created_at = models.DateTimeField(default=timezone.now)
    queued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["state", "priority", "queued_at"])]

    def __str__(self) -> str:
        return self.name

    @property
    def group_name(self) -> str:
        return run_group_name(self.pk)

    @property
    def on_slurm(self) -> bool:
        return self.executor == self.Executor.SLURM

    @property
    def has_live_slurm_job(self) -> bool:
        """Submitted, and not yet seen to end ("" right after sbatch: active until squeue says)."""
        return bool(self.slurm_job_id) and (not self.slurm_state or self.slurm_state in SLURM_ACTIVE_STATES)

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES

    @property
    def is_pending(self) -> bool:
        return self.state in self.PENDING_STATES

    @property
    def is_finished(self) -> bool:
        return self.state in self.FINISHED_STATES

    @property
    def run_dir(self) -> Path:
        return Path(settings.DATA_DIR) / "runs" / str(self.pk)

    @property
    def dataset_folder(self) -> Path:
        """The folder it trains from: its dataset version's (the build's for version 1), or a
        label check fold's."""
        if self.data_folder:
            return Path(settings.DATA_DIR) / self.data_folder
        if self.dataset_version_id is not None:
            return self.dataset_version.path
        return self.dataset.path

    @property
    def dataset_version_number(self) -> int:
        return self.dataset_version.number if self.dataset_version_id is not None else 1

    @property
    def log_path(self) -> Path:
        return self.run_dir / protocol.TRAINER_LOG

    def wait_reason_for(self, viewer) -> str:
        """The wait reason as `viewer` may read it: a holder they may not see is "another user's run"."""
        return wait_text_for(self.wait_reason, holder=self.wait_holder, viewer=viewer)

    @property
    def devices_wanted(self) -> DeviceRequest:
        return DeviceRequest.from_dict(self.device_request)

    def device_request_text(self) -> str:
        per_node = self.devices_wanted.text
        return f"{self.nodes} nodes x {per_node}" if self.nodes > 1 else per_node


# Stored in place of the holder in a wait reason; never names the holder, whoever reads it.
HOLDER_WORDS = "another run"


def wait_text_for(text: str, *, holder: Run | None, viewer) -> str:
    """`text` with HOLDER_WORDS replaced for `viewer`: the holder's number and name for its owner
    and staff, "another user's run" for everyone else (the same rule as the queue's own rows)."""
    if holder is None or HOLDER_WORDS not in text:
        return text
    if viewer is not None and holder.is_visible_to(viewer):
        return text.replace(HOLDER_WORDS, f"run #{holder.pk} ({holder.name})")
    return text.replace(HOLDER_WORDS, "another user's run")


class RunTransition(OwnedModel):
    """One state change of a run, with its time and reason: the run's timeline."""

    owner_field = "run__owner"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="transitions")
    from_state = models.CharField(max_length=16, blank=True)
    to_state = models.CharField(max_length=16)
    reason = models.TextField(blank=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"{self.from_state or 'new'} -> {self.to_state}"


class RunEvent(OwnedModel):
    """An event from the trainer (metrics, validation, status, progress, log, system).

    `seq` numbers a run's events 1, 2, 3... without gaps: clients that reconnect ask for everything
    after the last one they hold. Stored in batches by the task that watches the trainer.
    """

    owner_field = "run__owner"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=16)
    step = models.BigIntegerField(null=True, blank=True)
    epoch = models.FloatField(null=True, blank=True)
    time = models.FloatField()
    data = models.JSONField(default=dict)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="unique_event_seq_per_run")]
        indexes = [models.Index(fields=["run", "kind", "seq"])]

    def __str__(self) -> str:
        return f"#{self.seq} {self.kind}"
