"""A project (a lab, a course, a paper) and its members, each with one role.

What a role allows is written once, in workbench/core/ownership.py (`ROLES`, `visible_to`,
`changeable_by`); the datasets, runs, searches, benchmarks and uploaded weights put into a project
point here with a nullable `project` and are reached back as `project.datasets`, `project.runs`...
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from workbench.core.ownership import ADMIN, EDITOR, VIEWER


class Project(models.Model):
    name = models.CharField(max_length=80)
    # The project's name in URLs and commands (`/projects/vision-lab/`, `--project vision-lab`).
    slug = models.SlugField(max_length=60, unique=True)
    description = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        VIEWER = VIEWER, "viewer"
        EDITOR = EDITOR, "editor"
        ADMIN = ADMIN, "admin"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.VIEWER)
    added_at = models.DateTimeField(auto_now_add=True)
    # Given by the lab's directory's groups (workbench/directory/mapping.py), which also take it away;
    # a membership staff or an admin gave by hand is left to them.
    from_directory = models.BooleanField(default=False)

    class Meta:
        ordering = ["project__slug", "user__username"]
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_user")]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


class Quota(models.Model):
    """GPU-hours allowed to one user or one project per period (docs/design.md, "GPU-hour quotas")."""

    class Period(models.TextChoices):
        MONTH = "month", "calendar month"
        ROLLING = "rolling", "rolling window"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="quota"
    )
    project = models.OneToOneField(Project, null=True, blank=True, on_delete=models.CASCADE, related_name="quota")
    gpu_hours = models.FloatField()
    period = models.CharField(max_length=8, choices=Period.choices, default=Period.MONTH)
    # The rolling window's length; unused for a calendar month.
    window_days = models.PositiveIntegerField(default=30)
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    set_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(user__isnull=True) ^ models.Q(project__isnull=True),
                name="quota_of_one_user_or_project",
            )
        ]

    def __str__(self) -> str:
        return f"{self.gpu_hours:g} GPU-hours per {self.get_period_display()} for {self.holder_words}"

    @property
    def holder_words(self) -> str:
        return f"project {self.project.slug}" if self.project_id else f"user {self.user.get_username()}"


class GpuUsage(models.Model):
    """One stretch of GPUs a job held, written when the stretch ended: the ledger the quotas count
    (projects/quotas.py). Kept whatever becomes of the job (deleted, moved to another project):
    use is charged to whom and where it was when it happened, never undone or moved after."""

    # Whose use it was: the job's owner then.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # The project the job was in then (an id, not a key: a deleted project's use stays counted nowhere).
    project_id_then = models.IntegerField(null=True, blank=True)
    job_kind = models.CharField(max_length=16)  # "run", "benchmark"
    job_id = models.IntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField(db_index=True)
    gpus = models.PositiveIntegerField()

    class AccountedBy(models.TextChoices):
        # Devices x time as the workbench saw them: local runs and benchmarks, and a Slurm job's
        # stretch where the cluster keeps no accounting.
        WORKBENCH = "workbench"
        # A Slurm job's stretch as the follower saw it, until sacct's record replaces it: the
        # follower sees a start and an end a poll late, sacct has the cluster's own.
        ESTIMATE = "estimate"
        SACCT = "sacct"  # Slurm's accounting: elapsed x the GPUs it allocated (AllocTRES gres/gpu)

    accounted_by = models.CharField(max_length=16, choices=AccountedBy.choices, default=AccountedBy.WORKBENCH)
    slurm_job_id = models.CharField(max_length=32, blank=True, default="", db_index=True)

    class Meta:
        ordering = ["end"]

    def __str__(self) -> str:
        return f"{self.job_kind} {self.job_id}: {self.gpus} GPUs {self.start:%Y-%m-%d %H:%M} to {self.end:%H:%M}"
