"""A search's request is refused, with the field named, before anything is queued."""

import pytest

from tests.support.factories import make_dataset_row
from tests.workbench.runs.conftest import TINY_CONFIG
from workbench.core.errors import RequestError
from workbench.runs.models import Run
from workbench.searches.models import Search
from workbench.searches.services import search_create
from workbench.searches.validators import parse_param, validate_strategy

LR = {"type": "loguniform", "low": 1e-4, "high": 1e-1}
CHOICES_40 = {"type": "choice", "values": list(range(1, 41))}

# (what the request changes, the field refused, words of the message)
REFUSALS = [
    ({"space": {}}, "space", "at least one parameter"),
    ({"space": {"lr": {"type": "uniform", "low": 0.1, "high": 0.1}}}, "space.lr", "is empty"),
    ({"space": {"lr": {"type": "uniform", "low": 0.1, "high": 0.01}}}, "space.lr", "inverted"),
    ({"space": {"lr": {"type": "loguniform", "low": 0, "high": 0.1}}}, "space.lr", "log range must stay above 0"),
    ({"space": {"lr": {"type": "loguniform", "low": -1, "high": 0.1}}}, "space.lr", "log range must stay above 0"),
    ({"space": {"lr": {"type": "uniform", "low": "a", "high": 0.1}}}, "space.lr.low", "finite number"),
    ({"space": {"lr": {"type": "spline"}}}, "space.lr", "type among"),
    ({"space": {"batch_size": {"type": "choice", "values": []}}}, "space.batch_size", "non-empty list"),
    ({"space": {"batch_size": {"type": "choice", "values": [8, 8]}}}, "space.batch_size", "listed twice"),
    # a choice the run validators refuse: a batch that does not divide over the 2 GPUs
    ({"gpus": "2", "space": {"batch_size": {"type": "choice", "values": [8, 9]}}}, "space.batch_size", "9: "),
    # a learning rate the trainer refuses, at one end of the range
    ({"space": {"lr": {"type": "uniform", "low": 0.01, "high": 1e9}}}, "space.lr", "1000000000: "),
    # a network that cannot take the 8x8 images
    ({"space": {"network": {"type": "choice", "values": ["lenet", "alexnet"]}}}, "space.network", "'alexnet'"),
    ({"sampler": "grid"}, "sampler", "list of choices for every parameter"),
    ({"sampler": "annealing"}, "sampler", "one of"),
    ({"pruner": "asha2"}, "pruner", "one of"),
    ({"objective": "val_acc"}, "objective", "one of"),
    ({"trials": 0}, "trials", "between 1"),
    ({"trials": 4, "parallel": 5}, "parallel", "between 1 and the trials (4)"),
    ({"gpu_hours": -1.0}, "gpu_hours", "above 0"),
    # each value is a run to check before anything is queued: their number is bounded
    (
        {"space": {"batch_size": CHOICES_40, "momentum": CHOICES_40}},
        "space",
        "80 values to check (every choice, each range's two ends); at most 64",
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize("change, field, words", REFUSALS)
def test_it_refuses_a_bad_search_naming_the_field_before_anything_is_queued(owner, dataset, change, field, words):
    request = {
        "owner": owner, "dataset": dataset, "name": "", "network": "lenet", "config": TINY_CONFIG,
        "space": {"lr": LR}, "gpus": "cpu", "trials": 4, "parallel": 2, **change,
    }  # fmt: skip
    with pytest.raises(RequestError) as refused:
        search_create(**request)
    assert refused.value.field == field, refused.value.errors
    assert words in refused.value.message, refused.value.message
    assert not Search.objects.exists() and not Run.objects.exists()


def test_it_reads_the_command_lines_params():
    assert parse_param("lr=loguniform:1e-4:1e-1") == ("lr", {"type": "loguniform", "low": 1e-4, "high": 0.1})
    assert parse_param("batch_size=choice:32,64") == ("batch_size", {"type": "choice", "values": [32, 64]})
    assert parse_param("optimizer=choice:sgd,adam") == ("optimizer", {"type": "choice", "values": ["sgd", "adam"]})
    with pytest.raises(RequestError, match="expected NAME=TYPE"):
        parse_param("lr:1e-4")


def test_it_searches_a_detection_dataset_by_its_own_metric(transactional_db, owner):
    # transactional: the study is created through Optuna's own connection to the database

    shapes = make_dataset_row(owner, name="shapes", task="detection",
                                    image_width=64, image_height=64, channels=3, labels=["square", "disc"])  # fmt: skip
    request = {"owner": owner, "dataset": shapes, "name": "", "network": "fasterrcnn_mobilenet_v3_large_320_fpn",
               "config": {"epochs": 1, "batch_size": 4}, "space": {"lr": LR}, "gpus": "cpu", "trials": 2,
               "parallel": 1}  # fmt: skip
    with pytest.raises(RequestError) as refused:
        search_create(**request, objective="val_loss")  # a detector reports no validation loss
    assert refused.value.field == "objective" and "map, map_50" in refused.value.message
    search = search_create(**request)
    assert (search.objective, search.direction) == ("map", "maximize")


def test_it_builds_the_network_once_for_every_value_that_keeps_it(transactional_db, owner, dataset):
    # The network check depends on the network and the images alone: not on a learning rate or a batch.
    from trainer.preflight import input_refusal  # here: the module's other tests run without it

    space = {"lr": {"type": "choice", "values": [n / 1000 for n in range(1, 31)]},
             "batch_size": {"type": "choice", "values": list(range(1, 25))}, "momentum": LR}  # fmt: skip
    input_refusal.cache_clear()
    search_create(owner=owner, dataset=dataset, name="", network="lenet", config=TINY_CONFIG, space=space,
                  gpus="cpu", trials=4, parallel=2)  # fmt: skip
    checked = input_refusal.cache_info()
    assert (checked.misses, checked.hits) == (1, 30 + 24 + 2)  # the base, then every value


@pytest.mark.parametrize(
    ("task", "objective", "direction"),
    [
        ("classification", "val_loss", "minimize"),
        ("detection", "map", "maximize"),
        ("segmentation", "miou", "maximize"),
    ],
)
def test_it_defaults_the_objective_to_the_one_its_tasks_row_names(task, objective, direction):
    lr = {"lr": LR}
    chosen = validate_strategy(objective=None, direction=None, sampler="tpe", pruner="asha", space=lr, task=task)
    assert chosen == (objective, direction, "tpe", "asha")
