"""The new-run form's "find the largest batch" without a worker: the one-cell benchmark it
queues for the run's network, image size, precision and GPUs, the refusals naming the form's
field, and the run's global batch made of the per-process batch found."""

from __future__ import annotations

import pytest

from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from workbench.benchmarks.models import Benchmark
from workbench.benchmarks.selectors import largest_batch_answer

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_scheduling(monkeypatch):
    monkeypatch.setattr("workbench.benchmarks.services.queue_scheduling", lambda: None)


def ready_dataset(owner, **extra) -> Dataset:
    fields = {
        "name": "digits",
        "status": Dataset.Status.READY,
        "image_width": 20,
        "image_height": 24,
        "channels": 1,
        "labels": [str(i) for i in range(10)],
        "splits": {"train": {"count": 300}, "val": {"count": 60}},
        **extra,
    }
    return make_dataset_row(owner, **fields)


def test_it_queues_a_one_cell_benchmark_with_the_finder_for_the_runs_choices(owner_client, owner):
    dataset = ready_dataset(owner)
    body = {"dataset": dataset.pk, "network": "lenet", "crop_size": "", "precision": "bf16", "gpus": 2}
    answer = owner_client.post("/api/benchmarks/largest-batch/", body, content_type="application/json")
    assert answer.status_code == 201, answer.content
    benchmark = Benchmark.objects.get(pk=answer.json()["id"])
    request = benchmark.request
    assert request["networks"] == ["lenet"] and request["gpus"] == [2] and request["precision"] == "bf16"
    # Not square: the longer side; the dataset's channels and classes; no batch beyond the training set.
    assert (request["image_size"], request["channels"], request["num_classes"]) == (24, 1, 10)
    assert request["find_largest"] is True and request["batch_sizes"] == [1] and request["steps"] == 1
    assert request["find_limit"] == 150  # 300 training images over 2 processes
    assert answer.json()["state"] == "queued" and answer.json()["batch_size"] is None

    benchmark.state = Benchmark.State.DONE
    benchmark.largest_batches = [{"network": "lenet", "gpus": 2, "batch_size": 97, "limit": 150, "message": ""}]
    benchmark.save()
    polled = owner_client.get(f"/api/benchmarks/{benchmark.pk}/largest-batch/").json()
    assert (polled["per_gpu_batch"], polled["processes"], polled["batch_size"]) == (97, 2, 194)


def test_it_counts_model_parallel_groups_as_one_process(owner):
    benchmark = Benchmark(owner=owner, name="x", request={"gpus": [4], "layout": "2x2"})
    benchmark.largest_batches = [{"batch_size": 10, "limit": 4096}]
    assert largest_batch_answer(benchmark)["batch_size"] == 20


def test_it_refuses_naming_the_forms_field(owner_client, owner, other_user):
    mine, theirs = ready_dataset(owner), ready_dataset(other_user)

    def refusal(**body):
        answer = owner_client.post("/api/benchmarks/largest-batch/", body, content_type="application/json")
        assert answer.status_code == 400
        return answer.json()

    assert refusal(dataset=theirs.pk, network="lenet") == {"dataset": [f"no dataset {theirs.pk} of yours"]}
    assert "network" in refusal(dataset=mine.pk, network="custom")
    assert "network" in refusal(dataset=mine.pk, network="nonet")
    assert "model_parallel" in refusal(dataset=mine.pk, network="lenet", gpus=3, model_parallel=2)
    assert "precision" in refusal(dataset=mine.pk, network="lenet", precision="fp64")
    assert not Benchmark.objects.exists()
