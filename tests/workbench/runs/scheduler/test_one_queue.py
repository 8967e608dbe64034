"""Runs and benchmarks in one queue (workbench/runs/scheduler): one order with users' turns, one
all-or-nothing allocation, one estimate, one queue page; without a worker (database rows)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.support.factories import make_dataset_row
from workbench.benchmarks.models import Benchmark
from workbench.benchmarks.services import benchmark_submit
from workbench.runs.devices import DeviceRequest
from workbench.runs.lifecycle import run_finish
from workbench.runs.models import Run
from workbench.runs.scheduler import running_rows, schedule
from workbench.runs.services import run_create
from workbench.workers.models import Device
from workbench.workers.simulation import simulate_hosts

pytestmark = pytest.mark.django_db

GRID = {"networks": ["lenet"], "image_size": 28, "batch_sizes": "8", "steps": 3}


@pytest.fixture
def dataset(owner):
    return make_dataset_row(owner)


@pytest.fixture(autouse=True)
def no_launch(monkeypatch):
    monkeypatch.setattr("workbench.benchmarks.scheduling.launch", lambda pk, queue: None)
    monkeypatch.setattr("workbench.benchmarks.services.queue_scheduling", lambda: None)


def submit(owner, dataset, count: int, name: str) -> Run:
    request = DeviceRequest.gpus(count)
    return run_create(owner=owner, dataset=dataset, name=name, network="lenet", config={}, device_request=request)


def test_it_starts_an_older_benchmark_before_younger_runs_of_another_user(owner, other_user, dataset):
    simulate_hosts(hosts=1, gpus_per_host=2)
    holder = submit(owner, dataset, 2, "holder")
    schedule()
    benchmark = benchmark_submit(owner=owner, request={**GRID, "gpus": "2"})
    theirs = submit(other_user, dataset, 1, "theirs")
    schedule()
    benchmark.refresh_from_db(), theirs.refresh_from_db()
    assert benchmark.state == Benchmark.State.WAITING and theirs.state == Run.State.WAITING
    assert benchmark.wait_reason == "needs 2 GPUs on one host, 0 free"

    run_finish(run=holder, to_state=Run.State.DONE, reason="test")
    schedule()  # before one queue, the runs' pass gave a GPU to "theirs" and the benchmark starved
    benchmark.refresh_from_db(), theirs.refresh_from_db()
    assert benchmark.state == Benchmark.State.RUNNING
    assert Device.objects.filter(reserved_by=benchmark.reservation).count() == 2
    assert theirs.state == Run.State.WAITING
    assert theirs.wait_reason == "needs 1 GPU on one host, 0 free (2 held by a benchmark)"


def test_it_estimates_starts_from_a_benchmarks_budget_and_a_runs_eta(owner, other_user, dataset):
    simulate_hosts(hosts=1, gpus_per_host=1)
    benchmark = benchmark_submit(owner=owner, request={**GRID, "gpus": "1", "time_budget_minutes": 30})
    schedule()
    benchmark.refresh_from_db()
    assert benchmark.state == Benchmark.State.RUNNING
    run = submit(other_user, dataset, 1, "behind the benchmark")
    later = benchmark_submit(owner=owner, request={**GRID, "gpus": "1", "time_budget_minutes": 10})
    schedule()
    run.refresh_from_db(), later.refresh_from_db()
    now = timezone.now()
    # The run starts when the benchmark's budget runs out; the second benchmark after the run,
    # whose length nothing tells yet: no estimate rather than a made-up one.
    assert abs((run.estimated_start - now) - timedelta(minutes=30)) < timedelta(seconds=30)
    assert later.state == Benchmark.State.WAITING and later.estimated_start is None
    Run.objects.filter(pk=run.pk).update(eta_seconds=600)
    schedule()
    later.refresh_from_db()
    assert abs((later.estimated_start - now) - timedelta(minutes=40)) < timedelta(seconds=30)


def test_it_shows_what_runs_and_waits_of_both_kinds_to_each_viewer(client, owner, other_user, dataset):
    (host,) = simulate_hosts(hosts=1, gpus_per_host=1)
    running = submit(owner, dataset, 1, "alice's run")
    schedule()
    benchmark = benchmark_submit(owner=owner, request={**GRID, "gpus": "1", "name": "alice's benchmark"})
    schedule()

    client.force_login(other_user)
    picture = client.get("/api/queue/").json()
    assert [(row["kind"], row["name"], row["id"]) for row in picture["running"]] == [
        ("run", "another user's run", None)
    ]
    assert picture["running"][0]["where"] == f"{host.hostname}: GPU 0"
    assert [(row["position"], row["kind"], row["name"], row["id"]) for row in picture["queue"]] == [
        (1, "benchmark", "another user's benchmark", None)
    ]
    page = client.get("/runs/queue/").content.decode()
    assert "Running now" in page and "alice" not in page

    client.force_login(owner)
    picture = client.get("/api/queue/").json()
    assert picture["running"][0]["id"] == running.pk and picture["running"][0]["url"] == f"/runs/{running.pk}/"
    assert picture["queue"][0]["id"] == benchmark.pk and picture["queue"][0]["name"] == "benchmark: alice's benchmark"
    page = client.get("/runs/queue/").content.decode()
    assert f'href="/benchmarks/{benchmark.pk}/"' in page and f'href="/runs/{running.pk}/"' in page
    detail = client.get(f"/benchmarks/{benchmark.pk}/").content.decode()
    assert "at position 1 of 1, with the runs" in detail and "Time budget: 60 min" in detail


def test_it_names_a_host_once_for_the_devices_a_job_holds_there(owner, dataset):
    (host,) = simulate_hosts(hosts=1, gpus_per_host=2)
    submit(owner, dataset, 2, "two gpus")
    schedule()
    (row,) = running_rows()
    assert row.where == f"{host.hostname}: GPU 0, GPU 1"
