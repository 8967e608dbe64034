"""The pre-flight's rules, row by row: each refuses its case naming its field, says nothing of a
config that fits, and waits for the launch when the dataset's sizes are not known yet."""

from __future__ import annotations

import dataclasses

import pytest

from trainer.config import config_from_dict
from trainer.preflight import RULES, DatasetFacts, preflight

GREY = DatasetFacts(task="classification", channels=1, width=8, height=8, classes=3, train_images=24)
BOXES = DatasetFacts(task="detection", channels=3, width=16, height=16, classes=2, train_images=24)
DETECTOR = "fasterrcnn_mobilenet_v3_large_320_fpn"

# (facts, config fields, the field refused, words of the refusal): one row per rule of RULES.
ROWS = [
    (GREY, {"data": {"crop_size": 16}}, "data.crop_size", "16 is larger than the dataset images (8x8)"),
    (GREY, {"network": DETECTOR}, "network", f"{DETECTOR} is not a classification network; choose one of"),
    (BOXES, {"network": DETECTOR}, "network", "needs images of at least 32x32, dataset is 16x16"),
    (GREY, {"network": "alexnet"}, "network", "alexnet needs images of at least 63x63, dataset is 8x8"),
    (GREY, {"data": {"color_jitter": 0.4}}, "data.color_jitter", "needs colour images"),
    (GREY, {"best_metric": "map"}, "best_metric", "'map' is not a metric of classification"),
    (
        dataclasses.replace(BOXES, width=64, height=64),
        {"network": DETECTOR, "model_parallel": 2, "devices": ["cpu", "cpu"]},
        "model_parallel",
        "trains whole on each GPU",
    ),
    (GREY, {"batch_size": 32}, "batch_size", "32 is larger than the 24 training images"),
]


def _config(fields: dict):
    return config_from_dict({"run_dir": "run", "batch_size": 8, **fields}, check_paths=False)


def test_it_has_a_row_for_every_rule():
    assert len(ROWS) == len(RULES)


@pytest.mark.parametrize(("facts", "fields", "field", "words"), ROWS)
def test_it_refuses_each_case_naming_its_field(facts, fields, field, words):
    (refusal,) = preflight(_config(fields), facts)
    assert refusal.field == field and words in refusal.message


def test_it_passes_a_config_that_fits_and_waits_for_sizes_it_does_not_know():
    assert preflight(_config({}), GREY) == []
    unknown = DatasetFacts(task="classification", channels=1)
    assert preflight(_config({"network": "alexnet", "data": {"crop_size": 16}, "batch_size": 64}), unknown) == []


def test_it_refuses_layers_too_long_to_be_a_cache_key_before_building_them():
    from trainer.preflight import input_refusal

    misses = input_refusal.cache_info().misses
    layers = [{"type": "linear", "note": "x" * 200_000}]
    (refusal,) = preflight(_config({"network": "custom", "custom_layers": layers}), GREY)
    assert (refusal.field, refusal.message) == ("custom_layers", "the layers are over 128 KiB of JSON")
    assert input_refusal.cache_info().misses == misses  # nothing built, nothing kept
