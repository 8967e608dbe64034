"""A custom network is refused by an estimate of the memory it needs to train against the devices
asked for (a GPU's memory, or the host's RAM for a CPU run, from the workers' inventory), with
the numbers in the message, through the API, the form and sweeps alike."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.support.factories import make_dataset_row
from workbench.runs.models import Run
from workbench.workers.models import Device, WorkerHost

pytestmark = pytest.mark.django_db

# 64 inputs -> 2,000,000 -> 3 classes: 136 million parameters, ~2.0 GiB to train with Adam in fp32
# (under the trainer's limit of a billion parameters, which is checked without the devices).
WIDE = [{"type": "flatten"}, {"type": "linear", "out_features": 2_000_000}, {"type": "linear"}]


@pytest.fixture
def dataset(owner):
    # Enough training images for the largest batch below (the pre-flight refuses a larger batch).
    return make_dataset_row(
        owner, image_width=8, image_height=8, channels=1,
        labels=["a", "b", "c"], splits={"train": {"count": 100_000}},
    )  # fmt: skip


@pytest.fixture
def host():
    """The only worker: 1 GiB of RAM, a 2 GiB GPU 0 and an 80 GiB GPU 1."""
    WorkerHost.objects.all().delete()
    # Heard from "tomorrow": online however long torch takes to load (tests time workers out in 5 s).
    host = WorkerHost.objects.create(hostname="box", last_seen=timezone.now() + timedelta(days=1))
    for kind, index, memory in (("cpu", 0, 1024), ("gpu", 0, 2048), ("gpu", 1, 81920)):
        Device.objects.create(host=host, kind=kind, index=index, name=f"{kind} {index}", memory_total_mb=memory)
    return host


def _submit(client, dataset, gpus: str, **fields):
    body = {"dataset": dataset.pk, "network": "custom", "gpus": gpus, "batch_size": 8, **fields}
    return client.post(
        reverse("api-runs"), {**body, "config": {"custom_layers": WIDE}}, content_type="application/json"
    )


def test_it_refuses_a_network_larger_than_the_devices_asked_for_with_the_numbers(owner_client, dataset, host):
    answer = _submit(owner_client, dataset, "cpu")
    assert answer.status_code == 400
    (message,) = answer.json()["config"]
    assert message.startswith("custom_layers: needs about 2.1 GiB of memory per process to train (2.0 GiB for ")
    assert "136,000,003 parameters" in message and "for a batch of 8" in message
    assert message.endswith("the largest host's memory is 1.0 GiB: make the network or the batch smaller, or ask for "
                            "larger devices")  # fmt: skip
    small_gpu = _submit(owner_client, dataset, "box:0").json()["config"][0]
    assert "the smallest of GPU 0 has 2.0 GiB" in small_gpu
    assert not Run.objects.exists()
    # The same network on the 80 GiB GPU, or on any GPU by count (the largest is 80 GiB), is queued.
    assert _submit(owner_client, dataset, "box:1").status_code == 201
    assert _submit(owner_client, dataset, "1").status_code == 201


def test_it_counts_the_activations_of_the_batch_each_process_trains(owner_client, dataset, host):
    # Small weights, large outputs: 64 channels of 8x8 at batch 65,536 is ~4 GiB of activations in
    # fp32; in bf16 with 4 micro-batches, ~0.5 GiB, which the 2 GiB GPU holds.
    layers = [{"type": "conv2d", "out_channels": 64, "kernel_size": 3, "padding": 1}, {"type": "flatten"},
              {"type": "linear"}]  # fmt: skip
    body = {"dataset": dataset.pk, "network": "custom", "batch_size": 65536, "config": {"custom_layers": layers}}
    one = owner_client.post(reverse("api-runs"), {**body, "gpus": "box:0"}, content_type="application/json")
    assert one.status_code == 400 and "for a batch of 65536" in one.json()["config"][0]
    bf16 = owner_client.post(
        reverse("api-runs"),
        {**body, "gpus": "box:0", "config": {**body["config"], "precision": "bf16", "grad_accum": 4}},
        content_type="application/json",
    )
    assert bf16.status_code == 201, bf16.json()


def test_it_refuses_it_in_the_form_and_in_a_sweep_at_its_largest_batch(owner_client, dataset, host):
    sweep = {"dataset": dataset.pk, "network": "custom", "gpus": "box:0", "config": {"custom_layers": WIDE},
             "sweep": {"batch_size": [8, 16]}}  # fmt: skip
    answer = owner_client.post(reverse("api-sweeps"), sweep, content_type="application/json")
    assert answer.status_code == 400 and "for a batch of 16" in answer.json()["config"][0]
    form = owner_client.get(reverse("run-new"), {"dataset": dataset.pk}).context["form"]
    data = {name: form[name].value() for name in form.fields if form[name].value() not in (None, "", [])}
    data = {key: value for key, value in data.items() if value is not False}
    data.update(network="custom", custom_layers=json.dumps(WIDE), device_mode="cpu", batch_size="8")
    page = owner_client.post(reverse("run-new"), data)
    assert "the largest host&#x27;s memory is 1.0 GiB" in page.content.decode()
    assert not Run.objects.exists()
