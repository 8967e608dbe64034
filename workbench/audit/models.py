"""One row per change of state: who, when, from where, through which door, what, before and after
(docs/design.md, "The audit trail")."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditEntry(models.Model):
    class Door(models.TextChoices):
        PAGE = "page", "page"
        API = "api", "API"
        CLI = "cli", "command line"
        SYSTEM = "system", "the workbench itself"

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Kept when the account is deleted; for a failed sign-in, the username that was tried.
    actor_name = models.CharField(max_length=150, blank=True)
    door = models.CharField(max_length=8, choices=Door.choices)
    address = models.GenericIPAddressField(null=True, blank=True)
    action = models.CharField(max_length=80, db_index=True)
    target_kind = models.CharField(max_length=40, blank=True)
    target_id = models.CharField(max_length=80, blank=True)
    target_name = models.CharField(max_length=200, blank=True)
    # "done", or what refused it: an HTTP status ("403") or "error".
    outcome = models.CharField(max_length=16, default="done")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["target_kind", "target_id"])]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name or '-'} {self.action} {self.target_kind} {self.target_id}"
