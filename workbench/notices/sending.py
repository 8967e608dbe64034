"""Sending one delivery: an email over SMTP, a signed JSON POST, or a chat message through
apprise. Each raises SendError with words a user may read (no server paths, no secrets)."""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.error
import urllib.request

from django.conf import settings
from django.core.mail import EmailMessage, get_connection

from workbench.notices.models import Delivery, Notice

TIMEOUT_SECONDS = 10
SIGNATURE_HEADER = "X-Workbench-Signature"
DELIVERY_HEADER = "X-Workbench-Delivery"


class SendError(Exception):
    pass


def send(delivery: Delivery, *, secret: str = "") -> None:
    notice = delivery.notice
    if delivery.channel == Delivery.Channel.EMAIL:
        _email(notice, delivery.target)
    elif delivery.channel == Delivery.Channel.WEBHOOK:
        _webhook(notice, delivery, secret=secret)
    else:
        _apprise(notice, delivery.target)


def signature(body: bytes, secret: str) -> str:
    """HMAC-SHA256 of the body under the user's secret, as the header carries it."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def payload(notice: Notice, delivery: Delivery) -> bytes:
    body = {"id": delivery.pk, "kind": notice.kind, "subject": notice.subject, "text": notice.body,
            "data": notice.data, "at": notice.created_at.isoformat()}  # fmt: skip
    return json.dumps(body, sort_keys=True).encode()


def _email(notice: Notice, address: str) -> None:
    if not settings.NOTICE_SMTP_HOST:
        raise SendError("email is not set up on this workbench (no SMTP server)")
    connection = get_connection(
        backend="django.core.mail.backends.smtp.EmailBackend",
        host=settings.NOTICE_SMTP_HOST,
        port=settings.NOTICE_SMTP_PORT,
        username=settings.NOTICE_SMTP_USER or None,
        password=settings.NOTICE_SMTP_PASSWORD or None,
        use_tls=settings.NOTICE_SMTP_TLS,
        timeout=TIMEOUT_SECONDS,
    )
    message = EmailMessage(notice.subject, notice.body, settings.NOTICE_FROM, [address], connection=connection)
    try:
        message.send()
    except (OSError, Exception) as error:  # smtplib's errors, refused connections, timeouts
        raise SendError(f"the SMTP server refused or did not answer: {type(error).__name__}") from None


def _webhook(notice: Notice, delivery: Delivery, *, secret: str) -> None:
    body = payload(notice, delivery)
    headers = {"Content-Type": "application/json", DELIVERY_HEADER: str(delivery.pk)}
    if secret:
        headers[SIGNATURE_HEADER] = signature(body, secret)
    request = urllib.request.Request(delivery.target, data=body, headers=headers, method="POST")
    try:
        with _NO_REDIRECTS.open(request, timeout=TIMEOUT_SECONDS) as answer:
            answer.read(1024)
    except urllib.error.HTTPError as error:
        raise SendError(f"the webhook answered {error.code}") from None
    except (urllib.error.URLError, OSError) as error:
        raise SendError(f"the webhook did not answer: {type(error).__name__}") from None


class _Refuse(urllib.request.HTTPRedirectHandler):
    # A webhook answers where it was asked: a redirect is an error, never followed elsewhere.
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_NO_REDIRECTS = urllib.request.build_opener(_Refuse)


def _apprise(notice: Notice, url: str) -> None:
    import apprise  # why here: a chat service is optional, and apprise loads its many plugins on import

    sender = apprise.Apprise()
    if not sender.add(url):
        raise SendError("apprise does not know this URL")
    if not sender.notify(title=notice.subject, body=notice.body):
        raise SendError("the chat service did not take the message")
