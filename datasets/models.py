from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Dataset(models.Model):
    """An image dataset: imported from a source and built into per-split LMDBs."""

    class Status(models.TextChoices):
        PENDING = "pending"
        BUILDING = "building"
        READY = "ready"
        FAILED = "failed"
        CANCELLED = "cancelled"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    # Images processed and planned during a build, for the progress bar.
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    @property
    def progress_percent(self) -> float:
        if self.status == self.Status.READY:
            return 100.0
        if not self.progress_total:
            return 0.0
        return 100.0 * self.progress_done / self.progress_total
