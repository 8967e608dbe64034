"""Notices (workbench/notices/): events found from the stored rows, one notice per event, sent by
email to a real SMTP server and by a signed webhook to a real HTTP server, retried with backoff,
never sent twice; the settings' rules."""

from __future__ import annotations

import hashlib
import hmac
import time
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from tests.support.factories import make_dataset_row
from tests.workbench.projects.test_quotas import _ran
from workbench.notices import events, services
from workbench.notices.models import Delivery, Notice
from workbench.notices.sending import DELIVERY_HEADER, SIGNATURE_HEADER
from workbench.projects.models import Quota
from workbench.runs.models import Run, RunEvent
from workbench.workers.models import Device
from workbench.workers.simulation import simulate_hosts

pytestmark = pytest.mark.django_db
SECRET = "a secret of the lab's own, 32 chars"


def _finished(owner, *, state=Run.State.DONE) -> Run:
    return Run.objects.create(owner=owner, name="lenet-1", dataset=make_dataset_row(owner), network="lenet",
                              state=state, finished_at=timezone.now(), error="")  # fmt: skip


def _settings(owner, **fields) -> None:
    services.settings_update(by=owner, data=fields)


def test_it_emails_and_posts_a_signed_webhook_once_when_a_run_ends(owner, smtp_inbox, webhook):
    _settings(owner, webhook_url=webhook.url, webhook_secret=SECRET)
    run = _finished(owner)
    events.notice_pass()
    assert services.deliver_due() == 2
    [mail] = smtp_inbox
    assert mail["To"] == "alice@example.com" and mail["Subject"] == f"Run #{run.pk} lenet-1 finished"
    [(headers, body)] = webhook.received
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert headers[SIGNATURE_HEADER] == expected
    assert webhook.payloads()[0]["kind"] == "run_done" and webhook.payloads()[0]["data"] == {
        "run": run.pk,
        "state": "done",
    }
    assert headers[DELIVERY_HEADER] == str(Delivery.objects.get(channel="webhook").pk)
    # The same event again (a second worker, a restart): no second notice, nothing sent twice.
    events.notice_pass()
    assert services.deliver_due() == 0
    assert (len(smtp_inbox), len(webhook.received), Notice.objects.count()) == (1, 1, 1)


def test_it_retries_a_failed_webhook_with_backoff_and_then_sends_it(owner, webhook):
    _settings(owner, email_enabled=False, webhook_url=webhook.url)
    webhook.failures_left = 1
    _finished(owner, state=Run.State.FAILED)
    events.notice_pass()
    assert services.deliver_due() == 0
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts, delivery.error) == ("pending", 1, "the webhook answered 500")
    assert timedelta(seconds=25) < delivery.next_at - timezone.now() <= timedelta(seconds=30)
    assert services.deliver_due() == 0  # not due yet
    Delivery.objects.update(next_at=timezone.now())
    assert services.deliver_due() == 1
    assert Delivery.objects.get().attempts == 2 and webhook.payloads()[0]["kind"] == "run_failed"


def test_it_sends_again_a_delivery_whose_worker_died_mid_send(owner, webhook):
    _settings(owner, email_enabled=False, webhook_url=webhook.url)
    _finished(owner)
    events.notice_pass()
    Delivery.objects.update(state=Delivery.State.SENDING, claimed_at=timezone.now() - timedelta(minutes=5))
    assert services.deliver_due() == 1 and len(webhook.received) == 1


def test_it_says_why_email_could_not_be_sent_without_an_smtp_server(owner, settings):
    settings.NOTICE_SMTP_HOST = ""
    _finished(owner)
    events.notice_pass()
    services.deliver_due()
    assert Delivery.objects.get().error == "email is not set up on this workbench (no SMTP server)"


def test_it_tells_nothing_of_kinds_the_user_turned_off(owner, smtp_inbox):
    _settings(owner, kinds=["run_failed"])
    _finished(owner)
    events.notice_pass()
    assert not Notice.objects.exists()


def test_it_notices_a_run_that_reported_no_metric_for_its_owners_minutes(owner):
    _settings(owner, stall_minutes=30)
    run = Run.objects.create(owner=owner, name="slow", dataset=make_dataset_row(owner), network="lenet",
                             state=Run.State.RUNNING, started_at=timezone.now() - timedelta(hours=2))  # fmt: skip
    RunEvent.objects.create(run=run, seq=1, kind="metrics", time=time.time() - 40 * 60, data={"loss": 1.0})
    events.notice_pass()
    assert Notice.objects.get().subject == f"Run #{run.pk} slow has stalled"
    RunEvent.objects.create(run=run, seq=2, kind="metrics", time=time.time(), data={"loss": 0.9})
    Notice.objects.all().delete()
    events.notice_pass()
    assert not Notice.objects.exists()


def test_it_notices_a_quota_at_80_percent_once_per_period(owner, settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    _ran(owner, make_dataset_row(owner), gpus=1, hours=9)
    Quota.objects.create(user=owner, gpu_hours=10)
    _settings(owner, kinds=["quota_80"])
    events.notice_pass()
    assert Notice.objects.get().subject == "9.0 of 10 GPU-hours used for user alice"


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_refuses_bad_settings_by_name_and_never_reads_the_secret_back(owner):
    client = _as(owner)
    url = "/api/notices/settings/"
    for body, field in [({"webhook_url": "ftp://x/y"}, "webhook_url"), ({"webhook_secret": "short"}, "webhook_secret"),
                        ({"kinds": ["everything"]}, "kinds"), ({"stall_minutes": 1}, "stall_minutes"),
                        ({"email": "not-an-address"}, "email"), ({"colour": "red"}, "colour")]:  # fmt: skip
        answer = client.put(url, body, content_type="application/json")
        assert answer.status_code == 400 and field in answer.json(), (body, answer.content)
    saved = client.put(url, {"webhook_url": "https://lab.example/h", "webhook_secret": SECRET},
                       content_type="application/json").json()  # fmt: skip
    assert saved["webhook_signed"] is True and SECRET not in str(saved)


def test_it_saves_the_settings_from_the_page_and_lists_the_notices(owner, smtp_inbox):
    client = _as(owner)
    answer = client.post("/notices/", {"kinds": ["run_done"], "email_enabled": "on", "stall_minutes": "45"})
    assert answer.status_code == 302
    assert services.settings_for(owner).stall_minutes == 45
    bad = client.post("/notices/", {"kinds": ["run_done"], "stall_minutes": "2"})
    assert bad.status_code == 400 and "from 5 to 1440" in bad.content.decode()
    _finished(owner)
    events.notice_pass()
    services.deliver_due()
    page = client.get("/notices/").content.decode()
    assert "lenet-1 finished" in page and "email: sent" in page


def test_it_notices_a_run_whose_gpus_stay_idle_for_its_owners_minutes(owner, settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    _settings(owner, kinds=["devices_idle"], idle_minutes=15)
    [host] = simulate_hosts(hosts=1, gpus_per_host=2)
    run = Run.objects.create(owner=owner, name="idle", dataset=make_dataset_row(owner), network="lenet",
                             state=Run.State.RUNNING, attempt=1)  # fmt: skip
    Device.objects.filter(host=host).update(run=run, utilization_percent=0.0)
    events.notice_pass()
    assert not Notice.objects.exists()  # idle since now: not yet for 15 minutes
    cache.set(f"notices-idle-since:{run.pk}:1", time.time() - 16 * 60)
    events.notice_pass()
    assert Notice.objects.get().subject == f"Run #{run.pk} idle holds idle GPUs"
    Device.objects.filter(host=host).update(utilization_percent=85.0)  # busy again: the clock starts over
    events.notice_pass()
    assert cache.get(f"notices-idle-since:{run.pk}:1") is None
