"""A network that cannot take the dataset's images is refused alike by the form, the API and the
CLI, before anything is queued (a rule only the form checked was a hole in the API)."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from tests.workbench.runs.conftest import TINY_CONFIG
from workbench.runs.models import Run


def test_it_refuses_a_network_the_datasets_images_are_too_small_for_in_api_and_cli(
    db, owner, make_dataset, owner_client
):
    dataset = make_dataset(owner)  # 8x8 images
    body = {"dataset": dataset.pk, "network": "alexnet", "gpus": "cpu", "config": TINY_CONFIG}
    response = owner_client.post("/api/runs/", body, content_type="application/json")
    assert response.status_code == 400
    assert "alexnet needs images of at least 63x63" in response.json()["network"][0]
    with pytest.raises(CommandError, match="network: .*alexnet needs images of at least 63x63"):
        call_command("train", dataset=dataset.pk, network="alexnet", epochs=1, batch_size=8, gpus="cpu")
    body = {**body, "network": "lenet", "config": {**TINY_CONFIG, "data": {"crop_size": 16}}}
    response = owner_client.post("/api/runs/", body, content_type="application/json")
    assert response.json() == {"config": ["data.crop_size: 16 is larger than the dataset images (8x8)"]}
    assert Run.objects.count() == 0
