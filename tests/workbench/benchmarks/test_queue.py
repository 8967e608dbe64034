"""The benchmarks' queue without a worker: validation shared by API and CLI, GPUs taken to
itself (the runs' scheduler no longer offers them), a wait with its reason, cancel, and the
simulated GPUs' memory passed to the trainer as the capacity it enforces."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from datasets.models import Dataset
from workbench.benchmarks.models import Benchmark
from workbench.benchmarks.runner import trainer_config
from workbench.benchmarks.services import benchmark_cancel, benchmark_submit
from workbench.core.errors import RequestError
from workbench.runs.models import Run
from workbench.runs.scheduler import Inventory, find_placement, schedule
from workbench.runs.scheduler.run_jobs import run_job
from workbench.workers.models import Device
from workbench.workers.simulation import simulate_hosts

pytestmark = pytest.mark.django_db

GRID = {"networks": ["lenet"], "image_size": 28, "gpus": "1,2", "batch_sizes": "8,16", "steps": 3}


@pytest.fixture
def no_launch(monkeypatch):
    sent = []
    monkeypatch.setattr("workbench.benchmarks.scheduling.launch", lambda pk, queue: sent.append((pk, queue)))
    monkeypatch.setattr("workbench.benchmarks.services.queue_scheduling", lambda: None)
    return sent


def test_it_refuses_bad_requests_naming_the_field_in_api_and_cli(owner_client, owner, no_launch):
    answer = owner_client.post("/api/benchmarks/", {**GRID, "gpus": [1, 0]}, content_type="application/json")
    assert answer.status_code == 400 and "gpus" in answer.json()
    answer = owner_client.post("/api/benchmarks/", {**GRID, "data": "dataset:999"}, content_type="application/json")
    assert answer.json() == {"data": ["no dataset 999 of yours"]}
    answer = owner_client.post("/api/benchmarks/", {**GRID, "layout": "2by2"}, content_type="application/json")
    assert answer.status_code == 400 and "layout" in answer.json()
    call_command("benchmark", "--owner", owner.username, "--gpus", "1")  # the defaults are fine
    with pytest.raises(CommandError, match="gpus: 0 must be an integer from 1 to 64"):
        call_command("benchmark", "--owner", owner.username, "--gpus", "1,0")
    with pytest.raises(RequestError) as error:
        benchmark_submit(owner=owner, request={**GRID, "precision": "fp64"})
    assert error.value.field == "precision"
    assert Benchmark.objects.count() == 1  # only the valid CLI one


def test_it_takes_its_gpus_to_itself_and_waits_with_a_reason(owner, no_launch, django_capture_on_commit_callbacks):
    (host,) = simulate_hosts(hosts=1, gpus_per_host=2)
    first = benchmark_submit(owner=owner, request=GRID)
    second = benchmark_submit(owner=owner, request={**GRID, "gpus": "1"})
    with django_capture_on_commit_callbacks(execute=True):
        schedule()
    first.refresh_from_db(), second.refresh_from_db()
    assert first.state == Benchmark.State.RUNNING and no_launch == [(first.pk, host.queue)]
    assert first.device_labels == [f"{host.hostname}: GPU {i} (simulated)" for i in (0, 1)]
    assert Device.objects.filter(reserved_by=first.reservation).count() == 2
    assert Inventory.load().free_gpus(host) == []  # runs are not offered them
    # A run waiting for them says why, and still counts them in the host's size.
    waiting = Run(owner=owner, name="r", device_request={"kind": "count", "count": 2}, dataset=Dataset(status="ready"))
    placement, reason, holder = find_placement(run_job(waiting), Inventory.load())
    assert placement is None and holder is None
    assert reason == "needs 2 GPUs on one host, 0 free (2 held by a benchmark)"
    assert second.state == Benchmark.State.WAITING
    assert second.wait_reason == "needs 1 GPU on one host, 0 free (2 held by a benchmark)"
    benchmark_cancel(benchmark=first)  # running: asks its runner to stop
    first.refresh_from_db()
    assert first.cancel_requested and first.state == Benchmark.State.RUNNING
    assert benchmark_cancel(benchmark=second)
    second.refresh_from_db()
    assert second.state == Benchmark.State.CANCELLED


def test_it_gives_simulated_gpus_their_memory_as_the_capacity(owner, no_launch, settings):
    settings.SIMULATED_GPU_MEMORY_MB = 96
    from workbench.workers.inventory import simulated_gpus

    assert simulated_gpus(2)[0]["memory_total_mb"] == 96
    simulate_hosts(hosts=1, gpus_per_host=2)
    benchmark = benchmark_submit(owner=owner, request={**GRID, "layout": "2x1", "gpus": None})
    schedule()
    benchmark.refresh_from_db()
    config, env = trainer_config(benchmark, list(Device.objects.filter(reserved_by=benchmark.reservation)))
    assert config["devices"] == ["cpu", "cpu"] and config["memory_capacity_mb"] == 96
    assert config["model_parallel"] == 2 and config["gpu_counts"] == [2] and env["CUDA_VISIBLE_DEVICES"] == ""


def test_it_labels_the_gpu_counts_field_gpus(owner_client):
    page = owner_client.get("/benchmarks/").content.decode()
    assert '<label for="id_gpus">GPUs' in page and "Gpus" not in page


@pytest.mark.parametrize("text", ["1_000", "1e3", "9" * 400, "inf"])
def test_it_takes_whole_numbers_as_typed_in_the_form(owner_client, text):
    from workbench.benchmarks.forms import BenchmarkForm

    fields = {"networks": ["resnet18"], "image_size": "32", "gpus": "1", "batch_sizes": "8", "precision": "fp32",
              "data": "synthetic", "layout": "data", "modes": "train", "steps": "2", "warmup_steps": "0"}  # fmt: skip
    assert BenchmarkForm(fields).is_valid()
    form = BenchmarkForm({**fields, "steps": text})
    assert not form.is_valid() and "steps" in form.errors
