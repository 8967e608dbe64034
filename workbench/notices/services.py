"""Notices: writing one per event (idempotent), delivering the due ones (claimed, sent, retried
with backoff), and a user's settings. docs/design.md, "Notices"."""

from __future__ import annotations

import logging
from datetime import timedelta
from urllib.parse import urlsplit

from celery import current_app
from django.conf import settings as django_settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from workbench.audit import services as audit
from workbench.notices import validators
from workbench.notices.models import Delivery, Notice, NoticeSettings
from workbench.notices.sending import SendError, send

log = logging.getLogger(__name__)

# The worker's task that sends a new notice (tasks.deliver_notice), sent by its name: the tasks
# module imports this one, and a name is all a producer of a task needs.
DELIVER_TASK = "workbench.notices.tasks.deliver_notice"
# Backoff between tries: 30 s, then 1, 2, 4... minutes; failed for good after MAX_ATTEMPTS.
FIRST_RETRY_SECONDS = 30
MAX_ATTEMPTS = 8
# A claim older than this is a worker that died mid-send: the delivery is tried again.
CLAIM_SECONDS = 60


def email_available() -> bool:
    """Whether this workbench can send email (an SMTP server is set: settings.NOTICE_SMTP_HOST)."""
    return bool(django_settings.NOTICE_SMTP_HOST)


def settings_for(user) -> NoticeSettings:
    return NoticeSettings.objects.get_or_create(user=user)[0]


def settings_update(*, by, data: dict) -> NoticeSettings:
    cleaned = validators.clean_settings(data)
    notice_settings = settings_for(by)
    before = {name: _shown(name, getattr(notice_settings, name)) for name in cleaned}
    for name, value in cleaned.items():
        setattr(notice_settings, name, value)
    notice_settings.save()
    after = {name: _shown(name, value) for name, value in cleaned.items()}
    audit.record(action="notices.settings", actor=by, target_kind="user", target_id=by.pk,
                 target_name=by.get_username(), before=before, after=after)  # fmt: skip
    return notice_settings


def _shown(name: str, value):
    """A setting as the audit trail keeps it: URLs carry tokens (a Slack hook, an apprise URL's
    password) and the secret is a secret, so they are kept as whether set, scheme and host."""
    if name == "webhook_secret":
        return "set" if value else ""
    if name in ("webhook_url", "apprise_url") and value:
        parts = urlsplit(value)
        return f"{parts.scheme}://{parts.hostname or ''}/..."
    return value


def notify(*, user, kind: str, key: str, subject: str, body: str, data: dict | None = None) -> Notice | None:
    """One notice of this event for `user`, with a delivery per channel they chose; None when they
    do not want this kind, or when the event was already noticed (the same key)."""
    chosen = settings_for(user)
    if kind not in chosen.kinds:
        return None
    targets = _targets(chosen)
    try:
        with transaction.atomic():
            notice = Notice.objects.create(user=user, kind=kind, key=key, subject=subject, body=body, data=data or {})
            for channel, target in targets:
                Delivery.objects.create(notice=notice, channel=channel, target=target, next_at=timezone.now())
    except IntegrityError:
        return None  # seen already: a second worker, a restart, a pass again
    if targets:
        transaction.on_commit(lambda: _queue_delivery(notice.pk))
    return notice


def _targets(chosen: NoticeSettings) -> list[tuple[str, str]]:
    targets = []
    if chosen.email_enabled and chosen.address():
        targets.append((Delivery.Channel.EMAIL, chosen.address()))
    if chosen.webhook_url:
        targets.append((Delivery.Channel.WEBHOOK, chosen.webhook_url))
    if chosen.apprise_url:
        targets.append((Delivery.Channel.APPRISE, chosen.apprise_url))
    return targets


def _queue_delivery(notice_id: int) -> None:
    try:
        current_app.send_task(DELIVER_TASK, args=[notice_id])
    except Exception:
        # No broker now: the next housekeeping pass sends it (deliver_due).
        log.warning("could not queue notice %s; the housekeeping pass sends it", notice_id, exc_info=True)


def queue_due() -> int:
    """Queues a delivery task for each notice with a delivery due: the housekeeping pass asks for
    sending, never sends itself, so a slow webhook holds up one task, not every worker's pass."""
    now = timezone.now()
    due = Delivery.objects.filter(next_at__lte=now, state=Delivery.State.PENDING)
    stale = Delivery.objects.filter(state=Delivery.State.SENDING, claimed_at__lt=now - timedelta(seconds=CLAIM_SECONDS))
    notice_ids = sorted(set((due | stale).values_list("notice_id", flat=True)[:100]))
    for notice_id in notice_ids:
        _queue_delivery(notice_id)
    return len(notice_ids)


def deliver_due(*, notice_id: int | None = None) -> int:
    """Sends every delivery that is due (of one notice, or all); how many were sent."""
    now = timezone.now()
    due = Delivery.objects.filter(next_at__lte=now, state=Delivery.State.PENDING)
    stale = Delivery.objects.filter(state=Delivery.State.SENDING, claimed_at__lt=now - timedelta(seconds=CLAIM_SECONDS))
    rows = due | stale
    if notice_id is not None:
        rows = rows.filter(notice_id=notice_id)
    return sum(_deliver(delivery) for delivery in rows.select_related("notice__user")[:100])


def _deliver(delivery: Delivery) -> bool:
    # The claim: one worker sends it; another that read the same row finds it claimed.
    claimed = Delivery.objects.filter(pk=delivery.pk, state=delivery.state, claimed_at=delivery.claimed_at).update(
        state=Delivery.State.SENDING, claimed_at=timezone.now(), attempts=delivery.attempts + 1
    )
    if not claimed:
        return False
    delivery.refresh_from_db()
    try:
        send(delivery, secret=settings_for(delivery.notice.user).webhook_secret)
    except SendError as error:
        _retry_later(delivery, str(error))
        return False
    except Exception as error:  # a bug here must not stop the others' deliveries
        log.exception("delivery %s", delivery.pk)
        _retry_later(delivery, f"could not send: {type(error).__name__}")
        return False
    Delivery.objects.filter(pk=delivery.pk).update(state=Delivery.State.SENT, sent_at=timezone.now(), error="")
    return True


def _retry_later(delivery: Delivery, error: str) -> None:
    if delivery.attempts >= MAX_ATTEMPTS:
        Delivery.objects.filter(pk=delivery.pk).update(state=Delivery.State.FAILED, error=error[:500])
        return
    wait = FIRST_RETRY_SECONDS * 2 ** (delivery.attempts - 1)
    Delivery.objects.filter(pk=delivery.pk).update(
        state=Delivery.State.PENDING, error=error[:500], next_at=timezone.now() + timedelta(seconds=wait)
    )
