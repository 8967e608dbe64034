"""The trainer's pre-flight (trainer/preflight.py) is one rule at submit and at launch: a config
the API refuses on a dataset is the config the engine refuses on the same dataset's folder, in the
same words (copies of these checks in the workbench had drifted: a batch larger than the training
images passed the API and failed at launch)."""

from __future__ import annotations

import pytest

from tests.workbench.runs.conftest import TINY_CONFIG
from trainer.config import ConfigError, config_from_dict
from workbench.runs.models import Run

# One case per check: (network, config fields that break it), on "bars" (8x8 grey, 24 to train).
CASES = {
    "crop larger than the images": ("lenet", {"data": {"num_workers": 0, "crop_size": 16}}),
    "network of another task": ("fasterrcnn_mobilenet_v3_large_320_fpn", {}),
    "network cannot take the images": ("alexnet", {}),
    "recipe needs colour images": ("lenet", {"data": {"num_workers": 0, "color_jitter": 0.4}}),
    "best metric of another task": ("lenet", {"best_metric": "map"}),
    "batch larger than the training images": ("lenet", {"batch_size": 32}),
    "fp16 on the CPU": ("lenet", {"precision": "fp16"}),
}


def _submit_words(client, dataset, network: str, config: dict) -> str:
    body = {"dataset": dataset.pk, "network": network, "gpus": "cpu", "config": config}
    response = client.post("/api/runs/", body, content_type="application/json")
    assert response.status_code == 400, response.json()
    refused = response.json()
    # The network is a field of the request; every other setting is under "config", led by its path.
    return f"network: {refused['network'][0]}" if "network" in refused else refused["config"][0]


def _launch_words(dataset, network: str, config: dict, run_dir) -> str:
    # torch: the engine is loaded by this test only
    from trainer.engine import prepare

    raw = {**config, "network": network, "run_dir": str(run_dir), "devices": ["cpu"]}
    raw["data"] = {**config.get("data", {}), "dataset": dataset.path}
    with pytest.raises(ConfigError) as refused:
        prepare(config_from_dict(raw))
    return str(refused.value)


@pytest.mark.parametrize("case", list(CASES))
def test_it_refuses_a_config_in_the_same_words_at_submit_and_at_launch(case, owner_client, dataset, tmp_path):
    network, fields = CASES[case]
    config = {**TINY_CONFIG, **fields}
    submitted = _submit_words(owner_client, dataset, network, config)
    assert submitted == _launch_words(dataset, network, config, tmp_path)
    assert not Run.objects.exists()
