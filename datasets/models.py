from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import models
from django.utils import timezone

from trainer.protocol import TASKS
from workbench.core.groups import dataset_group_name
from workbench.core.ownership import OwnedModel
from workbench.core.task_table import TaskRow, task_row


class Dataset(OwnedModel):
    """An image dataset: imported from a source and built into per-split LMDBs."""

    class Status(models.TextChoices):
        PENDING = "pending"
        BUILDING = "building"
        READY = "ready"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class Kind(models.TextChoices):
        FOLDER = "folder", "Folder of class folders"
        ARCHIVE = "archive", "Archive (zip, tar, tar.gz)"
        TEXTLIST = "textlist", "Text list (path label)"
        LMDB = "lmdb", "Caffe Datum LMDB"
        DIGITS = "digits", "DIGITS dataset job folder"

    class ResizeMode(models.TextChoices):
        SQUASH = "squash", "Squash"
        CROP = "crop", "Crop"
        FILL = "fill", "Fill"
        HALF_CROP = "half_crop", "Half crop, half fill"

    class Encoding(models.TextChoices):
        NONE = "none", "None (raw pixels)"
        PNG = "png", "PNG (lossless)"
        JPG = "jpg", "JPEG (quality 90)"

    ACTIVE_STATUSES = (Status.PENDING, Status.BUILDING)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="datasets")
    # The project it is shared with (docs/design.md, "Projects and roles"); null: its owner's alone.
    project = models.ForeignKey(
        "projects.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="datasets"
    )
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    # Images processed and planned during a build, for the progress bar.
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    # What the dataset is for (trainer/protocol.py TASKS); its runs, inference and export follow it.
    task = models.CharField(max_length=16, choices=[(t, t.capitalize()) for t in TASKS], default=TASKS[0])
    # Where the images come from: {"path", "labels", "image_folder", "val", "test", "upload"}; for
    # detection and segmentation also "format" (datasets.labels.FORMATS), "class_map" (the class
    # table: {source class: new name or null}) and "min_box_size" (pixels).
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FOLDER)
    source = models.JSONField(default=dict, blank=True)
    # Build options (DIGITS's names and defaults).
    image_width = models.PositiveIntegerField(default=256)
    image_height = models.PositiveIntegerField(default=256)
    channels = models.PositiveSmallIntegerField(default=3)
    resize_mode = models.CharField(max_length=16, choices=ResizeMode.choices, default=ResizeMode.SQUASH)
    encoding = models.CharField(max_length=8, choices=Encoding.choices, default=Encoding.PNG)
    val_percent = models.PositiveSmallIntegerField(default=25)
    test_percent = models.PositiveSmallIntegerField(default=0)
    min_per_class = models.PositiveIntegerField(default=2)
    max_per_class = models.PositiveIntegerField(null=True, blank=True)
    shuffle = models.BooleanField(default=True)
    seed = models.PositiveIntegerField(default=0)

    # What the build produced.
    labels = models.JSONField(default=list, blank=True)
    # {"train": {"count": n, "class_counts": [...]}, ...}
    splits = models.JSONField(default=dict, blank=True)
    skipped_count = models.PositiveIntegerField(default=0)
    size_bytes = models.BigIntegerField(default=0)
    images_per_second = models.FloatField(default=0.0)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Who builds it (the Celery worker's name and the boot of its process) and which try this is:
    # a build whose worker stops sending heartbeats, or restarts, is queued again.
    build_worker = models.CharField(max_length=255, blank=True)
    build_boot_id = models.UUIDField(null=True, blank=True)
    build_attempts = models.PositiveSmallIntegerField(default=0)

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

    @property
    def task_row(self) -> TaskRow:
        """What the pages do for this dataset's task (workbench/core/task_table.py), for templates
        included by many views (the run's actions)."""
        return task_row(self.task)

    @property
    def path(self) -> Path:
        """The dataset folder (exists only once the build succeeded)."""
        return Path(settings.DATA_DIR) / "datasets" / str(self.pk)

    @property
    def progress_group_name(self) -> str:
        return dataset_group_name(self.pk)

    def progress_payload(self) -> dict:
        """The payload of a `dataset.progress` message."""
        return {
            "done": self.progress_done,
            "total": self.progress_total,
            "images_per_second": self.images_per_second,
            "eta_seconds": self.eta_seconds,
            "status": self.status,
        }

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE_STATUSES

    # How the failures start that another try may cure: the build's own crash, lost workers.
    RETRYABLE_ERRORS = ("Internal error while building", "The build was interrupted")

    @property
    def rebuild_can_help(self) -> bool:
        """Cancelled, crashed or interrupted builds may succeed again, and so may a server folder
        fixed since; an uploaded archive the build refused would only be refused again."""
        if self.status == self.Status.CANCELLED:
            return True
        if self.status != self.Status.FAILED:
            return False
        return not (self.source or {}).get("upload") or self.error.startswith(self.RETRYABLE_ERRORS)

    @property
    def eta_seconds(self) -> float | None:
        if self.status != self.Status.BUILDING or not self.images_per_second or not self.progress_total:
            return None
        return max(self.progress_total - self.progress_done, 0) / self.images_per_second

    @property
    def image_count(self) -> int:
        return sum(int(s.get("count", 0)) for s in (self.splits or {}).values())

    def class_counts(self) -> list[dict]:
        """Per class: {"label", "name", "train", "val", "test", "total"} for tables and charts."""
        rows = []
        for index, name in enumerate(self.labels or []):
            row = {"label": index, "name": name}
            for split in ("train", "val", "test"):
                counts = (self.splits or {}).get(split, {}).get("class_counts") or []
                row[split] = counts[index] if index < len(counts) else 0
            row["total"] = row["train"] + row["val"] + row["test"]
            rows.append(row)
        return rows


class DatasetVersion(OwnedModel):
    """An immutable state of a dataset's images and labels (docs/design.md, "Dataset versions"):
    version 1 is the build; each later one is its parent with fixes (datasets/versions.py).
    Seen and changed by whoever may see and change its dataset."""

    owner_field = "dataset__owner"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    # trainer.versions.version_digest: of the images and labels it holds, whatever led to them.
    digest = models.CharField(max_length=32)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The fixes made on the parent, as validated (datasets.validators.clean_fixes).
    fixes = models.JSONField(default=list, blank=True)
    # Dataset.splits' shape: {"train": {"count": n, "class_counts": [...]}, ...}
    splits = models.JSONField(default=dict, blank=True)
    note = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["dataset", "number"]
        constraints = [models.UniqueConstraint(fields=["dataset", "number"], name="one_number_per_dataset_version")]

    def __str__(self) -> str:
        return f"{self.dataset.name} v{self.number}"

    @property
    def path(self) -> Path:
        """The folder its runs train from: the build's for version 1."""
        if self.number == 1:
            return self.dataset.path
        return self.dataset.path / "versions" / str(self.number)

    @property
    def short_digest(self) -> str:
        return self.digest[:12]

    @property
    def image_count(self) -> int:
        return sum(int(s.get("count", 0)) for s in (self.splits or {}).values())
