"""A real Celery worker process on the suite's real Redis."""

import time

import pytest
from django.urls import reverse

from workbench.workers.models import WorkerHost

pytestmark = [pytest.mark.slow]


def test_it_runs_a_task_queued_through_the_web_layer(celery_worker, transactional_db, owner_client):
    response = owner_client.post(reverse("api-probe"))
    assert response.status_code == 202
    task_id = response.json()["task_id"]
    deadline = time.monotonic() + 30
    while True:
        status = owner_client.get(reverse("api-task", args=[task_id])).json()
        if status["state"] == "SUCCESS" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status["state"] == "SUCCESS", status
    # What the worker offers, as its heartbeat lists it: the suite's 2 simulated GPUs and the CPU.
    assert [d["kind"] for d in status["result"]["devices"]] == ["gpu", "gpu", "cpu"]


def test_it_records_the_worker_heartbeat_with_its_devices(celery_worker, transactional_db, client):
    deadline = time.monotonic() + 15
    while not WorkerHost.objects.filter(hostname__startswith="test-worker@").exists():
        assert time.monotonic() < deadline, f"no heartbeat within 15 s:\n{celery_worker.tail()}"
        time.sleep(0.2)
    host = WorkerHost.objects.get(hostname__startswith="test-worker@")
    assert host.is_online
    cpu = next(device for device in host.devices if device["kind"] == "cpu")
    assert cpu["cores"] >= 1
    first_seen = host.last_seen
    time.sleep(1.5)
    host.refresh_from_db()
    assert host.last_seen > first_seen, "the heartbeat stopped"
    report = client.get(reverse("healthz")).json()
    assert report["status"] == "ok", report
