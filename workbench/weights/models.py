"""Weights filed in the store: published ones (torchvision, timm) and a lab's own (local); and
the weights users upload to start their runs from.

The store is shared by every user, as a library is: any user may start a run from `weights:<id>`;
staff file and remove them (`manage.py weights`, the Weights page).
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import models
from django.utils import timezone

from workbench.core.ownership import OwnedModel
from workbench.weights.catalog import finite_numbers, headline
from workbench.weights.files import cache_roots, resolves_inside


class StoredWeights(models.Model):
    class Source(models.TextChoices):
        TORCHVISION = "torchvision"
        TIMM = "timm"
        LOCAL = "local"

    network = models.CharField(max_length=100)
    source = models.CharField(max_length=16, choices=Source.choices)
    tag = models.CharField(max_length=100, blank=True)  # IMAGENET1K_V2, timm's tag, an import's --tag
    file_name = models.CharField(max_length=255)  # what users see: the published name, or the imported one's
    # Absolute: a file in a library's cache lives outside the data dir. Never shown to users.
    path = models.CharField(max_length=1000, unique=True)
    sha256 = models.CharField(max_length=64)
    size_bytes = models.PositiveBigIntegerField(default=0)
    tensor_count = models.PositiveIntegerField(default=0)
    verified = models.BooleanField(default=False)  # the hash matched the library's published one
    licence = models.CharField(max_length=300, blank=True)
    dataset = models.CharField(max_length=100, blank=True)  # what they were trained on: "ImageNet-1k"
    accuracy = models.JSONField(default=dict, blank=True)  # published: {"acc@1": 69.758, "acc@5": 89.078}
    # The weights' own preprocessing, from the library's metadata: mean and std on 0..1 pixels.
    mean = models.JSONField(null=True, blank=True)
    std = models.JSONField(null=True, blank=True)
    resize = models.PositiveIntegerField(null=True, blank=True)
    crop = models.PositiveIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["network", "-verified", "tag", "pk"]
        verbose_name_plural = "stored weights"

    def __str__(self) -> str:
        return f"{self.reference} {self.network} {self.label}"

    @property
    def file(self) -> Path:
        return Path(self.path)

    @property
    def present(self) -> bool:
        """There, and really in one of the caches: a link swapped after filing to point elsewhere
        (the server's secret key) makes the row absent, never offered."""
        return any(resolves_inside(self.file, root) for root in cache_roots())

    @property
    def reference(self) -> str:
        """How a run config names them (docs/formats.md)."""
        return f"weights:{self.pk}"

    @property
    def label(self) -> str:
        """As the new-run form offers them: "ImageNet-1k (torchvision IMAGENET1K_V1)"."""
        if self.source == self.Source.LOCAL:
            return f"local weights {self.tag or self.file_name} (unverified)"
        # Found in a cache but not matched to a hash the library or the hub recorded: its claim only.
        unverified = "" if self.verified else ", unverified"
        return f"{self.dataset or 'published'} ({self.source} {self.tag}{unverified})"

    @property
    def top1(self) -> float | None:
        value = finite_numbers(self.accuracy or {}).get("acc@1")
        return None if value is None else float(value)

    @property
    def headline(self) -> str:
        return headline(self.accuracy or {}, self.dataset)

    def preprocessing(self) -> dict:
        """The normalisation a run fine-tuning from them uses (the trainer config's data fields)."""
        if not self.mean or not self.std:
            return {}
        return {"norm_mean": list(self.mean), "norm_std": list(self.std)}


class UploadedWeights(OwnedModel):
    """A state_dict file a user uploaded to start runs from (`upload:<id>`). The file lives under
    DATA_DIR/pretrained/user<owner>/ and was checked once, on arrival, by the trainer's reader.
    Moved here from the runs app (issue 32): its table keeps its name, runs_pretrainedweights."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="pretrained_weights")
    # The project it is shared with (docs/design.md, "Projects and roles"); null: its owner's alone.
    project = models.ForeignKey(
        "projects.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="weights"
    )
    name = models.CharField(max_length=200)
    # Relative to DATA_DIR, so the data dir can move; only the server ever writes it.
    path = models.CharField(max_length=500, unique=True)
    size_bytes = models.PositiveBigIntegerField(default=0)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "runs_pretrainedweights"
        ordering = ["-created"]
        verbose_name_plural = "uploaded weights"

    def __str__(self) -> str:
        return self.name

    @property
    def file(self) -> Path:
        return Path(settings.DATA_DIR) / self.path

    @property
    def reference(self) -> str:
        """How a run config names them (workbench/weights/references.py)."""
        return f"upload:{self.pk}"
