"""The tasks' traits (trainer.protocol.TASK_TRAITS, `Task.traits`): one row per task, carried by
its Task, and the rules that run without torch read the row instead of comparing the task's name
(issue 32): the smallest image side, the recipe's augmentations, a split's targets LMDB."""

from __future__ import annotations

import json

import pytest

from tests.support.task_data import make_task_folder
from tests.support.trainer_data import make_dataset_folder
from trainer.bench.config import benchmark_from_dict
from trainer.config import ConfigError
from trainer.dataset_folder import DatasetFolderError, load_dataset_folder
from trainer.preflight import DatasetFacts, side_refusal
from trainer.protocol import CLASSIFICATION, DETECTION, SEGMENTATION, TASK_MIN_SIDE, TASK_TRAITS, TASKS
from trainer.recipes import recipe_refusal
from trainer.tasks import task_for

DETECTOR = "fasterrcnn_mobilenet_v3_large_320_fpn"


def test_it_gives_every_task_its_own_row_of_traits():
    assert tuple(TASK_TRAITS) == TASKS
    for name in TASKS:
        assert task_for(name).traits is TASK_TRAITS[name]
    assert TASK_TRAITS[CLASSIFICATION].augments and not TASK_TRAITS[CLASSIFICATION].targets_db
    assert TASK_TRAITS[DETECTION].min_side == TASK_TRAITS[SEGMENTATION].min_side == TASK_MIN_SIDE


@pytest.mark.parametrize("task", TASKS)
def test_it_holds_small_images_to_the_tasks_smallest_side(task):
    small = DatasetFacts(task=task, width=TASK_MIN_SIDE - 1, height=TASK_MIN_SIDE)
    refusal = side_refusal("any", small)
    assert (refusal is None) == (TASK_TRAITS[task].min_side is None)
    if refusal:
        assert f"needs images of at least {TASK_MIN_SIDE}x{TASK_MIN_SIDE}" in refusal.message


@pytest.mark.parametrize("task", TASKS)
def test_it_refuses_the_recipe_where_the_task_takes_no_augmentations(task):
    mixup = {"data.mixup_alpha": 0.2}.get
    refusal = recipe_refusal(mixup, channels=3, task=task)
    assert (refusal is None) == TASK_TRAITS[task].augments
    if refusal:
        assert refusal[0] == "data.mixup_alpha" and f"this dataset is for {task}" in refusal[1]


def test_it_asks_a_targets_lmdb_only_of_a_task_whose_splits_have_one(tmp_path):
    classes = load_dataset_folder(make_dataset_folder(tmp_path / "classes", train=3, val=0))
    assert classes.splits["train"].targets_db is None
    folder = make_task_folder(tmp_path / "boxes", task=DETECTION, size=32, train=2, val=0)
    meta = json.loads((folder / "dataset.json").read_text())
    del meta["splits"]["train"]["targets_db"]
    (folder / "dataset.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetFolderError, match="targets_db"):
        load_dataset_folder(folder)


def test_it_refuses_a_synthetic_benchmark_below_the_networks_tasks_side(tmp_path):
    raw = {"run_dir": str(tmp_path), "networks": [DETECTOR], "image_size": TASK_MIN_SIDE // 2}
    with pytest.raises(ConfigError) as refused:
        benchmark_from_dict(raw, check_paths=False)
    assert refused.value.field == "image_size"
    assert benchmark_from_dict({**raw, "networks": ["lenet"]}, check_paths=False).image_size == TASK_MIN_SIDE // 2
