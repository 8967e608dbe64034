"""The benchmark pages say what their numbers are: simulated GPUs named as CPU processes, only
the published numbers that match, compare links only where there is something to compare, and a
ratio that reads as its heading."""

from __future__ import annotations

import pytest

from workbench.benchmarks.models import Benchmark, BenchmarkCell

pytestmark = pytest.mark.django_db


def make(owner, *, network="lenet", image_size=32, labels=("host: GPU 0 (simulated)",), speeds=None) -> Benchmark:
    request = {"networks": [network], "image_size": image_size, "precision": "fp32", "modes": ["train"], "gpus": [1]}
    benchmark = Benchmark.objects.create(
        owner=owner, name=f"{network} {image_size}", request=request, state="done", device_labels=list(labels)
    )
    for seq, (batch, speed) in enumerate((speeds or {}).items(), 1):
        data = {"network": network, "precision": "fp32", "mode": "train", "data": "synthetic", "gpus": 1,
                "batch_size": batch, "status": "ok", "images_per_sec": speed}  # fmt: skip
        BenchmarkCell.objects.create(benchmark=benchmark, seq=seq, network=network, gpus=1, batch_size=batch,
                                     status="ok", data=data)  # fmt: skip
    return benchmark


def test_it_names_simulated_gpus_as_cpu_processes(owner_client, owner):
    simulated = make(owner, speeds={8: 100.0})
    real = make(owner, labels=("gpu-box: GPU 0",), speeds={8: 100.0})
    assert 'id="simulated-caveat"' in owner_client.get(f"/benchmarks/{simulated.pk}/").content.decode()
    assert "simulated GPUs" in owner_client.get(f"/benchmarks/{simulated.pk}/benchmark.md").content.decode()
    assert 'id="simulated-caveat"' not in owner_client.get(f"/benchmarks/{real.pk}/").content.decode()


def test_it_shows_only_the_published_numbers_that_match(owner_client, owner):
    lenet = owner_client.get(f"/benchmarks/{make(owner).pk}/").content.decode()
    assert "A100" not in lenet and 'id="no-references"' in lenet and "resnet50" in lenet
    resnet = owner_client.get(f"/benchmarks/{make(owner, network='resnet50', image_size=224).pk}/").content.decode()
    assert "A100" in resnet and 'id="no-references"' not in resnet


def test_it_offers_compare_links_only_where_a_cell_is_shared_and_reads_the_ratio_as_its_heading(owner_client, owner):
    first = make(owner, speeds={8: 150.0, 16: 200.0})
    shared = make(owner, speeds={8: 100.0})
    disjoint = make(owner, speeds={64: 100.0})
    page = owner_client.get(f"/benchmarks/{first.pk}/").content.decode()
    assert f"/benchmarks/{first.pk}/compare/{shared.pk}/" in page
    assert f"/benchmarks/{first.pk}/compare/{disjoint.pk}/" not in page
    compare = owner_client.get(f"/benchmarks/{first.pk}/compare/{shared.pk}/").content.decode()
    assert f"#{first.pk} ÷ #{shared.pk}" in compare and "1.50x" in compare  # 150 over 100: the first is faster


def test_it_lays_the_form_out_in_labelled_groups_with_the_time_budget(owner_client):
    page = owner_client.get("/benchmarks/").content.decode()
    assert page.count("<fieldset>") == 3 and 'class="form-grid"' in page
    assert '<label for="id_time_budget_minutes">Time budget (minutes)</label>' in page
