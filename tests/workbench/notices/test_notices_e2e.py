"""A notice from real Celery workers: a run of alice's ends, and within 30 s her signed webhook
reaches a real HTTP server, found and sent by the workers alone (their housekeeping pass and the
delivery task), nothing called by the test. Email is left to tests/workbench/notices/
test_notices.py (a real SMTP server, sent in the test's process): the suite's other workers know
no SMTP server, and whichever worker claims a delivery first sends it."""

from __future__ import annotations

import hashlib
import hmac
import time

import pytest
from django.utils import timezone

from tests.conftest import start_worker
from tests.support.factories import make_dataset_row
from tests.support.waiting import wait_until
from workbench.notices import services
from workbench.notices.models import Delivery
from workbench.notices.sending import SIGNATURE_HEADER
from workbench.runs.models import Run

pytestmark = [pytest.mark.slow]
SECRET = "the lab's webhook secret, 32 chars"


def test_it_sends_the_signed_webhook_within_30_seconds(transactional_db, owner, webhook):
    services.settings_update(
        by=owner, data={"email_enabled": False, "webhook_url": webhook.url, "webhook_secret": SECRET}
    )
    worker = start_worker("notice-worker")
    try:
        ended = time.monotonic()
        run = Run.objects.create(owner=owner, name="lenet-1", dataset=make_dataset_row(owner), network="lenet",
                                 state=Run.State.DONE, finished_at=timezone.now())  # fmt: skip
        wait_until(lambda: webhook.received, what="alice's webhook", timeout=30)
        took = time.monotonic() - ended
        # Marked sent once the receiver answered: a later pass does not send it again.
        wait_until(lambda: Delivery.objects.filter(state=Delivery.State.SENT).exists(), what="the delivery marked sent")
    finally:
        worker.stop()
    assert took < 30
    headers, body = webhook.received[0]
    assert headers[SIGNATURE_HEADER] == "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert webhook.payloads()[0]["subject"] == f"Run #{run.pk} lenet-1 finished"
    assert len(webhook.received) == 1
