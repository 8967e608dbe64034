"""Published reference numbers on a benchmark's page: beside the matching column only (network,
image size, precision, mode, GPU count), always with their source; nothing beside a benchmark
that no published number matches."""

from __future__ import annotations

import pytest

from tests.conftest import log_in
from workbench.benchmarks.lifecycle import cells_append
from workbench.benchmarks.models import Benchmark
from workbench.benchmarks.references import REFERENCES, references_for

pytestmark = [pytest.mark.django_db(transaction=True)]

SOURCE = "NVIDIA DeepLearningExamples, ResNet-50 v1.5 for PyTorch"


def measured(owner, *, network: str, precision: str, image_size: int, gpus: list[int]) -> Benchmark:
    request = {"networks": [network], "image_size": image_size, "precision": precision, "modes": ["train"]}
    request["gpus"] = gpus
    benchmark = Benchmark.objects.create(owner=owner, name=network, request=request, state=Benchmark.State.DONE)
    cells = [
        {"network": network, "precision": precision, "mode": "train", "data": "synthetic", "gpus": g,
         "batch_size": 256, "status": "ok", "images_per_sec": 1000.0 * g, "images_per_sec_per_gpu": 1000.0}
        for g in gpus
    ]  # fmt: skip
    cells_append(benchmark=benchmark, cells=cells)
    return benchmark


def test_it_matches_only_the_published_setting(owner):
    assert {(r["precision"], r["gpus"], r["images_per_sec"]) for r in REFERENCES} == {
        ("fp32", 1, 938), ("fp32", 8, 7248), ("fp16", 1, 2470), ("fp16", 8, 16621)
    }  # fmt: skip
    assert all(SOURCE in r["source"] and r["url"].startswith("https://github.com/NVIDIA/") for r in REFERENCES)
    request = {"networks": ["resnet50"], "image_size": 224, "precision": "fp16", "modes": ["train"]}
    assert [r["images_per_sec"] for r in references_for(request)] == [2470, 16621]
    assert references_for({**request, "image_size": 160}) == []
    assert references_for({**request, "precision": "bf16"}) == []
    assert references_for({**request, "modes": ["forward"]}) == []
    assert references_for({**request, "networks": ["resnet18"]}) == []


def test_it_shows_a_reference_under_its_gpu_count_with_its_source(live_server_url, page, owner, client):
    benchmark = measured(owner, network="resnet50", precision="fp16", image_size=224, gpus=[1, 2, 8])
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/benchmarks/{benchmark.pk}/")
    page.wait_for_selector("tr.reference")
    one, eight = page.locator("td[data-reference-gpus='1']"), page.locator("td[data-reference-gpus='8']")
    assert one.locator("a").text_content() == "2,470 (mixed precision (AMP, fp16), 1 x A100-80GB)"
    assert eight.locator("a").text_content().startswith("16,621 ")
    assert SOURCE in one.text_content() and SOURCE in eight.text_content()
    assert page.locator("td[data-reference-gpus='2']").count() == 0  # nobody published 2 GPUs
    # Its own measured cells are untouched beside it.
    assert page.locator("td[data-gpus='8'][data-batch='256']").text_content().startswith("8,000")
    client.force_login(owner)
    markdown = client.get(f"/benchmarks/{benchmark.pk}/benchmark.md").content.decode()
    assert "mixed precision (AMP, fp16), 8 x A100-80GB: 16,621 images/s" in markdown and SOURCE in markdown

    other = measured(owner, network="lenet", precision="fp32", image_size=28, gpus=[1])
    page.goto(f"{live_server_url}/benchmarks/{other.pk}/")
    page.wait_for_selector("td[data-status=ok]")
    assert page.locator("tr.reference").count() == 0
