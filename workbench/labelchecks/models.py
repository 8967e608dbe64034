from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import models
from django.utils import timezone

from workbench.core.ownership import OwnedModel


class LabelCheck(OwnedModel):
    """The data doctor's label check of a dataset version (docs/design.md, "Label errors"): K
    fold runs through the queue, then confident learning over their held-out predictions."""

    class State(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        ABORTED = "aborted"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="label_checks")
    project = models.ForeignKey(
        "projects.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="label_checks"
    )
    dataset = models.ForeignKey("datasets.Dataset", on_delete=models.PROTECT, related_name="label_checks")
    version = models.ForeignKey("datasets.DatasetVersion", on_delete=models.PROTECT, related_name="label_checks")
    network = models.CharField(max_length=64)
    folds = models.PositiveSmallIntegerField(default=5)
    # The fold runs' trainer config as submitted (their held-out predictions switched on).
    config = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.RUNNING)
    error = models.TextField(blank=True)
    # Images checked and suspects found, once done (the whole report is a file: report_path).
    images = models.PositiveIntegerField(default=0)
    suspects = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"label check {self.pk} of {self.dataset.name} v{self.version.number}"

    @property
    def folder(self) -> Path:
        """Its folds' dataset folders and its report, inside the dataset's folder."""
        return self.dataset.path / "doctor" / "label-checks" / str(self.pk)

    @property
    def report_path(self) -> Path:
        return self.folder / "suspects.json"

    @property
    def is_finished(self) -> bool:
        return self.state != self.State.RUNNING


class LabelCheckFold(OwnedModel):
    """One fold: a run trained on the other folds that predicts this one's images."""

    owner_field = "label_check__owner"

    label_check = models.ForeignKey(LabelCheck, on_delete=models.CASCADE, related_name="fold_runs")
    index = models.PositiveSmallIntegerField()
    # Null once its run is deleted (runs.services.run_delete takes other apps' rows with the run
    # or lets go of them): the check then fails, naming the fold.
    run = models.OneToOneField("runs.Run", null=True, on_delete=models.SET_NULL, related_name="label_check_fold")
    # The build's places of its held-out images, in the order the run predicts them.
    places = models.JSONField(default=list)

    class Meta:
        ordering = ["label_check", "index"]
        constraints = [models.UniqueConstraint(fields=["label_check", "index"], name="one_run_per_fold")]
