"""What a user wants to be told and how, what they were told, and each delivery's state
(docs/design.md, "Notices")."""

from __future__ import annotations

from django.conf import settings
from django.db import models

# The events a user may be told of, in words (the settings page lists them).
KINDS = {
    "run_done": "a run of mine finished",
    "run_failed": "a run of mine failed",
    "run_stalled": "a running run of mine reported no metric for a while",
    "search_done": "a search of mine ended",
    "quota_80": "a quota of mine or of my projects reached 80 %",
    "devices_idle": "a run of mine holds GPUs it has not used for a while",
}


def default_kinds() -> list[str]:
    return list(KINDS)


class NoticeSettings(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notice_settings")
    kinds = models.JSONField(default=default_kinds)
    email_enabled = models.BooleanField(default=True)
    # Blank: the account's address.
    email = models.EmailField(blank=True)
    # A URL of the user's own: a JSON POST signed with HMAC-SHA256 under `webhook_secret`.
    webhook_url = models.URLField(max_length=500, blank=True)
    webhook_secret = models.CharField(max_length=200, blank=True)
    # A chat service through apprise (slack://, msteams://, matrix://, json://...).
    apprise_url = models.CharField(max_length=500, blank=True)
    stall_minutes = models.PositiveIntegerField(default=30)
    idle_minutes = models.PositiveIntegerField(default=15)

    def __str__(self) -> str:
        return f"notices of {self.user}"

    def address(self) -> str:
        return self.email or self.user.email


class Notice(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notices")
    kind = models.CharField(max_length=20)
    # One event, one notice: `run:12:done` seen twice (a restart, a second worker) writes nothing more.
    key = models.CharField(max_length=120)
    subject = models.CharField(max_length=200)
    body = models.TextField()
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="one_notice_per_event")]

    def __str__(self) -> str:
        return f"{self.key} for {self.user}"


class Delivery(models.Model):
    class Channel(models.TextChoices):
        EMAIL = "email", "email"
        WEBHOOK = "webhook", "webhook"
        APPRISE = "apprise", "chat service"

    class State(models.TextChoices):
        PENDING = "pending", "pending"
        SENDING = "sending", "sending"
        SENT = "sent", "sent"
        FAILED = "failed", "failed"

    notice = models.ForeignKey(Notice, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.CharField(max_length=8, choices=Channel.choices)
    # Where it goes, fixed when the notice was made (a later change of settings does not redirect it).
    target = models.CharField(max_length=500)
    state = models.CharField(max_length=8, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_at = models.DateTimeField()
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["next_at", "pk"]
        constraints = [models.UniqueConstraint(fields=["notice", "channel"], name="one_delivery_per_channel")]

    def __str__(self) -> str:
        return f"{self.notice.key} by {self.channel}: {self.state}"
