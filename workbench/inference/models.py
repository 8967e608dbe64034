from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import models
from django.utils import timezone

from workbench.core.ownership import OwnedModel
from workbench.core.task_table import task_row


class InferenceJob(OwnedModel):
    """A background job on a trained run: classify, detect or segment many images, or test on
    labelled images (the run's task decides what a test measures).

    Runs as a Celery task that starts the inference engine in a subprocess (the worker pool is
    threads); the task relays the engine's progress here. `result` holds the summary the pages
    show; bigger outputs (the CSV, the mistakes gallery) are files in `folder`.
    """

    class Kind(models.TextChoices):
        CLASSIFY = "classify", "Classify many"
        DETECT = "detect", "Detect many"
        SEGMENT = "segment", "Segment many"
        TEST = "test", "Test"

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    class Source(models.TextChoices):
        VAL = "val", "Validation split"
        TEST = "test", "Test split"
        UPLOAD = "upload", "Uploaded images"

    ACTIVE_STATES = (State.QUEUED, State.RUNNING)
    # A running job silent for this long lost its worker (the engine reports every batch).
    STALE_SECONDS = 300

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="inference_jobs")
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="inference_jobs")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    # "best", "latest" or a checkpoint file name such as step_00000120.pt
    checkpoint = models.CharField(max_length=64, default="best")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.UPLOAD)
    # What the user uploaded (the archive's or files' names), for the page.
    input_name = models.CharField(max_length=300, blank=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    # Last sign of life of the task running the job (claim, then every progress line): a job
    # whose worker died stays "running" until someone looks and finds this too old.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk} on {self.run_id}"

    @property
    def test_headline(self) -> tuple[str, float | None]:
        """A done test's headline measure for the jobs list, by its task's row: ("mAP50", 0.61)."""
        key, name = task_row(self.result.get("task")).test_headline
        return name, self.result.get(key)

    @property
    def folder(self) -> Path:
        return Path(settings.DATA_DIR) / "inference" / str(self.pk)

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES

    @property
    def progress_percent(self) -> float:
        if self.state == self.State.DONE:
            return 100.0
        if not self.progress_total:
            return 0.0
        return 100.0 * self.progress_done / self.progress_total
