"""A real Celery worker process on the suite's real Redis."""

import pytest
from django.urls import reverse

from tests.support.waiting import wait_until
from workbench.workers.models import WorkerHost

pytestmark = [pytest.mark.slow]


def test_it_runs_a_task_queued_through_the_web_layer(celery_worker, transactional_db, owner_client):
    response = owner_client.post(reverse("api-probe"))
    assert response.status_code == 202
    task_id = response.json()["task_id"]
    last = {}

    def succeeded() -> dict | None:
        last.update(owner_client.get(reverse("api-task", args=[task_id])).json())
        return dict(last) if last["state"] == "SUCCESS" else None

    status = wait_until(succeeded, what=lambda: f"task {task_id} to succeed (now {last})", timeout=30)
    # What the worker offers, as its heartbeat lists it: the suite's 2 simulated GPUs and the CPU.
    assert [d["kind"] for d in status["result"]["devices"]] == ["gpu", "gpu", "cpu"]


def test_it_records_the_worker_heartbeat_with_its_devices(celery_worker, transactional_db, client):
    wait_until(
        lambda: WorkerHost.objects.filter(hostname__startswith="test-worker@").exists(),
        what=lambda: f"the worker's first heartbeat:\n{celery_worker.tail()}",
        timeout=15,
    )
    host = WorkerHost.objects.get(hostname__startswith="test-worker@")
    assert host.is_online
    cpu = next(device for device in host.devices if device["kind"] == "cpu")
    assert cpu["cores"] >= 1
    first_seen = host.last_seen
    wait_until(
        lambda: host.refresh_from_db() or host.last_seen > first_seen,
        what=lambda: f"a second heartbeat after {first_seen}:\n{celery_worker.tail()}",
        timeout=15,
    )
    report = client.get(reverse("healthz")).json()
    assert report["status"] == "ok", report
