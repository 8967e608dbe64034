"""A notice from a real Celery worker: a run of alice's ends, and within 30 s her email reaches a
real SMTP server and her signed webhook a real HTTP server, found and sent by the worker alone
(its housekeeping pass and the delivery task), nothing called by the test."""

from __future__ import annotations

import hashlib
import hmac
import time

import pytest
from django.conf import settings
from django.utils import timezone

from tests.conftest import start_worker
from tests.support.factories import make_dataset_row
from tests.support.waiting import wait_until
from workbench.notices import services
from workbench.notices.sending import SIGNATURE_HEADER
from workbench.runs.models import Run

pytestmark = [pytest.mark.slow]
SECRET = "the lab's webhook secret, 32 chars"


def test_it_sends_the_email_and_the_signed_webhook_within_30_seconds(transactional_db, owner, smtp_inbox, webhook):
    services.settings_update(by=owner, data={"webhook_url": webhook.url, "webhook_secret": SECRET})
    worker = start_worker(
        "notice-worker", WORKBENCH_SMTP_HOST="127.0.0.1", WORKBENCH_SMTP_PORT=str(settings.NOTICE_SMTP_PORT)
    )
    try:
        ended = time.monotonic()
        run = Run.objects.create(owner=owner, name="lenet-1", dataset=make_dataset_row(owner), network="lenet",
                                 state=Run.State.DONE, finished_at=timezone.now())  # fmt: skip
        wait_until(lambda: smtp_inbox and webhook.received, what="alice's email and webhook", timeout=30)
        took = time.monotonic() - ended
    finally:
        worker.stop()
    assert took < 30
    assert smtp_inbox[0]["Subject"] == f"Run #{run.pk} lenet-1 finished"
    headers, body = webhook.received[0]
    assert headers[SIGNATURE_HEADER] == "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
