import json

import pytest
from django.urls import reverse
from django.utils import timezone

from workbench.workers.inventory import consumer_beat
from workbench.workers.models import WorkerHost


@pytest.mark.django_db
def test_it_reports_degraded_without_workers(client):
    response = client.get(reverse("healthz"))
    assert response.status_code == 503
    report = response.json()
    assert report["status"] == "degraded"
    assert report["checks"]["database"]["ok"] is True
    assert report["checks"]["broker"]["ok"] is True
    assert report["checks"]["channel_layer"]["ok"] is True
    assert report["checks"]["live_channel_layer"] == {**report["checks"]["live_channel_layer"], "ok": True,
                                                      "detail": "RedisPubSubChannelLayer"}  # fmt: skip
    assert report["checks"]["workers"] == {"ok": False, "detail": "no worker has sent a heartbeat recently", "ms": 0.0}


@pytest.mark.django_db
def test_it_reports_ok_with_a_fresh_heartbeat_and_lists_devices(client):
    WorkerHost.objects.create(hostname="w@gpu1", devices=[{"kind": "gpu", "index": 0, "name": "H200"}])
    consumer_beat(hostname="w@gpu1", consuming=True)
    report = client.get(reverse("healthz")).json()
    assert report["status"] == "ok"
    assert report["workers"][0]["hostname"] == "w@gpu1"
    assert report["workers"][0]["consuming"] is True
    assert report["workers"][0]["devices"][0]["name"] == "H200"


@pytest.mark.django_db
def test_it_reports_a_worker_that_beats_but_does_not_consume_as_degraded(client):
    # Alive (fresh heartbeat) but deaf (its consumer lost the broker): not "ok".
    WorkerHost.objects.create(hostname="w@deaf")
    consumer_beat(hostname="w@deaf", consuming=False)
    response = client.get(reverse("healthz"))
    assert response.status_code == 503
    report = response.json()
    assert report["workers"][0]["online"] is True and report["workers"][0]["consuming"] is False
    assert report["checks"]["workers"] == {
        "ok": False,
        "detail": "1 online, none consuming tasks from the broker",
        "ms": 0.0,
    }
    consumer_beat(hostname="w@deaf", consuming=True)
    assert client.get(reverse("healthz")).json()["checks"]["workers"]["detail"] == "1 online and consuming"


@pytest.mark.django_db
def test_it_shows_a_silent_worker_offline(client, settings):
    WorkerHost.objects.create(
        hostname="w@old", last_seen=timezone.now() - timezone.timedelta(seconds=settings.WORKER_TIMEOUT_SECONDS + 1)
    )
    report = client.get(reverse("healthz")).json()
    assert report["workers"][0]["online"] is False
    assert report["checks"]["workers"]["ok"] is False


@pytest.mark.django_db
def test_it_reveals_no_secrets(client, settings):
    body = client.get(reverse("healthz")).content.decode()
    password = settings.REDIS_URL.split("@")[0].split(":")[-1]
    assert password and password not in body
    assert settings.SECRET_KEY not in body
    assert "127.0.0.1" not in body


@pytest.mark.django_db
def test_it_reports_a_dead_broker(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    report = json.loads(client.get(reverse("healthz")).content)
    assert report["checks"]["broker"]["ok"] is False
    assert "Connection" in report["checks"]["broker"]["detail"]


def test_it_shows_devices_and_who_uses_them_on_the_gpus_page(owner_client, owner):
    import uuid

    from datasets.models import Dataset
    from workbench.runs.models import Run
    from workbench.workers.inventory import host_heartbeat
    from workbench.workers.models import Device

    host = host_heartbeat(
        hostname="w@gpu1",
        boot_id=uuid.uuid4(),
        devices=[{"kind": "gpu", "index": 0, "name": "NVIDIA H200", "memory_total_mb": 143771, "memory_used_mb": 10}],
    )
    dataset = Dataset.objects.create(owner=owner, name="d")
    run = Run.objects.create(owner=owner, dataset=dataset, name="resnet run", network="resnet50")
    Device.objects.filter(host=host).update(run=run)
    body = owner_client.get(reverse("gpus")).content.decode()
    assert "w@gpu1" in body and "NVIDIA H200" in body and "10 / 143771 MiB" in body
    assert "resnet run (alice)" in body
