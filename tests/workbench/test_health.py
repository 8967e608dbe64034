import json
import os
import signal
import subprocess
import time

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.support.factories import make_dataset_row
from workbench.embedded_redis import embedded_redis_command, free_port, wait_until_ready
from workbench.health import HEALTH_DEADLINE_SECONDS
from workbench.workers.inventory import consumer_beat
from workbench.workers.models import WorkerHost


@pytest.mark.django_db
def test_it_reports_degraded_without_workers(client, staff_user):
    client.force_login(staff_user)
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
def test_it_logs_no_error_for_its_not_ready_answer(client, caplog):
    # The run command waits on /healthz until the worker's first heartbeat: each 503 it gets was
    # logged as `ERROR django.request: Service Unavailable: /healthz`.
    with caplog.at_level("INFO", logger="django.request"):
        assert client.get(reverse("healthz")).status_code == 503
        assert client.get("/no-such-page/").status_code in (302, 404)  # the other answers are still logged
    assert [record.getMessage() for record in caplog.records if record.name == "django.request"] == [
        "Not Found: /no-such-page/"
    ]


@pytest.mark.django_db
def test_it_reports_ok_with_a_fresh_heartbeat_and_lists_devices(client, staff_user):
    client.force_login(staff_user)
    WorkerHost.objects.create(hostname="w@gpu1", devices=[{"kind": "gpu", "index": 0, "name": "H200"}])
    consumer_beat(hostname="w@gpu1", consuming=True)
    report = client.get(reverse("healthz")).json()
    assert report["status"] == "ok"
    assert report["workers"][0]["hostname"] == "w@gpu1"
    assert report["workers"][0]["consuming"] is True
    assert report["workers"][0]["devices"][0]["name"] == "H200"


@pytest.mark.django_db
def test_it_reports_a_worker_that_beats_but_does_not_consume_as_degraded(client, staff_user):
    client.force_login(staff_user)
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
def test_it_shows_a_silent_worker_offline(client, settings, staff_user):
    client.force_login(staff_user)
    WorkerHost.objects.create(
        hostname="w@old", last_seen=timezone.now() - timezone.timedelta(seconds=settings.WORKER_TIMEOUT_SECONDS + 1)
    )
    report = client.get(reverse("healthz")).json()
    assert report["workers"][0]["online"] is False
    assert report["checks"]["workers"]["ok"] is False


@pytest.mark.django_db
def test_it_reveals_no_secrets(client, settings, staff_user):
    client.force_login(staff_user)
    body = client.get(reverse("healthz")).content.decode()
    password = settings.REDIS_URL.split("@")[0].split(":")[-1]
    assert password and password not in body
    assert settings.SECRET_KEY not in body
    assert "127.0.0.1" not in body


@pytest.mark.django_db
def test_it_reports_a_dead_broker(client, settings, staff_user):
    client.force_login(staff_user)
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    report = json.loads(client.get(reverse("healthz")).content)
    assert report["checks"]["broker"]["ok"] is False
    assert "Connection" in report["checks"]["broker"]["detail"]
    assert "127.0.0.1" not in report["checks"]["broker"]["detail"]  # the broker's address is internal


@pytest.mark.django_db
def test_it_shows_anonymous_clients_the_states_only(client):
    WorkerHost.objects.create(hostname="w@anonymous-view", devices=[{"kind": "gpu", "index": 0, "name": "H200"}])
    report = client.get(reverse("healthz")).json()
    # No Redis version, database engine, host names, CPU models or memory: only what is up.
    assert report == {
        "status": "degraded",
        "checks": {
            "database": {"ok": True},
            "broker": {"ok": True},
            "channel_layer": {"ok": True},
            "live_channel_layer": {"ok": True},
            "workers": {"ok": False},
        },
    }


@pytest.fixture
def frozen_broker(tmp_path, settings):
    """A Redis of its own, stopped with SIGSTOP (its port still accepts connections, nothing
    answers), that the settings point the broker, the cache and both channel layers at."""
    command = embedded_redis_command(data_dir=tmp_path, port=free_port(), persist=False)
    server = subprocess.Popen(command.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_ready(command.url, process=server)
        settings.REDIS_URL = command.url
        settings.CACHES = {
            "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": command.url}
        }
        hosts = [{"address": command.url, "socket_timeout": 30}]
        settings.CHANNEL_LAYERS = {
            "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": hosts}},
            settings.LIVE_CHANNEL_LAYER: {
                "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                "CONFIG": {"hosts": hosts},
            },
        }
        os.kill(server.pid, signal.SIGSTOP)
        yield command.url
    finally:
        os.kill(server.pid, signal.SIGCONT)
        server.kill()
        server.wait()


@pytest.mark.django_db
def test_it_answers_within_its_deadline_when_the_broker_is_frozen(client, staff_user, frozen_broker):
    # 67 s before: the channel layers' sends ran outside their 2 s timeout.
    WorkerHost.objects.create(hostname="w@gpu1")
    client.force_login(staff_user)
    started = time.monotonic()
    response = client.get(reverse("healthz"))
    assert time.monotonic() - started < HEALTH_DEADLINE_SECONDS + 1
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["database"]["ok"] is True
    assert not any(checks[name]["ok"] for name in ("broker", "channel_layer", "live_channel_layer"))
    assert "127.0.0.1" not in response.content.decode() and frozen_broker.split("@")[0] not in response.content.decode()


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
    dataset = make_dataset_row(owner, name="d", status=Dataset.Status.PENDING)
    run = Run.objects.create(owner=owner, dataset=dataset, name="resnet run", network="resnet50")
    Device.objects.filter(host=host).update(run=run)
    body = owner_client.get(reverse("gpus")).content.decode()
    assert "w@gpu1" in body and "NVIDIA H200" in body and "10 / 143771 MiB" in body
    assert "resnet run (alice)" in body
