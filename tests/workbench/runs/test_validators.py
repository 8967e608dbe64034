"""The one validator of what users ask for, through every entry point: the API, sweeps, the new-run
form, the command line and benchmarks refuse the same extremes with a 400 (or a form or command
error) naming the field, never a 500 and never a stored run; a sweep's size is judged from its
lists' lengths before anything is built."""

from __future__ import annotations

import json
import time
import tracemalloc

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from tests.support.factories import make_dataset_row
from trainer.config import RANGES
from workbench.benchmarks.validators import validate_benchmark_request
from workbench.runs.models import Run
from workbench.runs.validators import first_repeat

pytestmark = pytest.mark.django_db

# JSON's extremes for a number: 400 digits, the largest finite double, 1e309 (which Python's json
# reads as infinity: it was stored, and the database refused the row with a 500), booleans (not
# numbers), text, containers. (NaN and Infinity are refused by the API's parser as a whole.)
OVERFLOW, UNDERFLOW = "<1e309>", "<-1e309>"
JSON_EXTREMES = [10**400, -(10**400), 1e308, -1e308, OVERFLOW, UNDERFLOW, True, False, "1", "NaN", [], {}]
# And a form's: Python's float() and int() take the underscore, "inf" and "nan" spellings.
TEXT_EXTREMES = ["9" * 400, "-" + "9" * 400, "1e308", "1e309", "-1e308", "inf", "nan", "1_000", "0x10", "true"]
# The form field of each trainer field the new-run form offers.
FORM_FIELD = {
    "epochs": "epochs",
    "grad_accum": "grad_accum",
    "seed": "seed",
    "val_interval": "val_interval",
    "snapshot_interval": "snapshot_interval",
    "early_stopping_patience": "early_stopping_patience",
    "early_stopping_min_delta": "early_stopping_min_delta",
    "model_parallel": "model_parallel",
    "solver.momentum": "momentum",
    "solver.weight_decay": "weight_decay",
    "solver.gamma": "gamma",
    "solver.power": "power",
    "solver.step_size": "step_size",
    "solver.min_lr": "min_lr",
    "solver.warmup_percent": "warmup_percent",
    "solver.onecycle_pct_start": "onecycle_pct_start",
    "solver.onecycle_div_factor": "onecycle_div_factor",
    "solver.onecycle_final_div_factor": "onecycle_final_div_factor",
    "solver.grad_clip_norm": "grad_clip_norm",
    "data.num_workers": "num_workers",
    "data.crop_size": "crop_size",
    "batch_size": "batch_size",
    "solver.base_lr": "base_lr",
}


def _nested(path: str, value) -> dict:
    owner, _, leaf = path.rpartition(".")
    return {owner: {leaf: value}} if owner else {leaf: value}


def _post(client, name: str, body) -> object:
    text = json.dumps(body).replace(f'"{OVERFLOW}"', "1e309").replace(f'"{UNDERFLOW}"', "-1e309")
    return client.post(reverse(name), text, content_type="application/json")


@pytest.fixture
def api(owner):
    client = Client(raise_request_exception=False)  # a 500 is an answer to check, not an exception here
    client.force_login(owner)
    return client


def test_it_refuses_every_extreme_of_every_trainer_number_through_the_api_naming_it(api, dataset):
    base = {"dataset": dataset.pk, "network": "lenet", "gpus": "cpu", "epochs": 1, "batch_size": 8}
    started = time.monotonic()
    for path in sorted(RANGES):
        for value in JSON_EXTREMES:
            if path in ("epochs", "batch_size"):
                body = {**base, path: value}  # the shortcut fields: judged by the same ranges
            elif path == "nodes":
                if value == "1":
                    continue  # a top-level field of the request: decimal text is taken, as the CLI sends it
                body = {**base, "nodes": value}
            else:
                body = {**base, "config": _nested(path, value)}
            answer = _post(api, "api-runs", body)
            assert answer.status_code == 400, (path, value, answer.status_code, answer.content[:300])
            text = json.dumps(answer.json())
            leaf = path.rpartition(".")[2]
            assert leaf in text or path == "nodes", (path, value, text)
            assert len(text) < 400, (path, value, text)
    assert not Run.objects.exists()
    assert time.monotonic() - started < 60


def test_it_refuses_every_extreme_in_a_sweep_naming_the_swept_field(api, dataset):
    base = {"dataset": dataset.pk, "network": "lenet", "gpus": "cpu", "epochs": 1}
    for key, other in (("lr", {"batch_size": 8}), ("batch_size", {"lr": 0.1})):
        for value in JSON_EXTREMES:
            answer = _post(api, "api-sweeps", {**base, **other, "sweep": {key: [value]}})
            assert answer.status_code == 400, (key, value, answer.content[:300])
            assert answer.json()["sweep"][0].startswith(f"{key}: "), (key, value, answer.json())
    assert not Run.objects.exists()


def test_it_refuses_every_extreme_in_every_number_of_the_form_naming_the_field(owner, dataset):
    from tests.workbench.runs.web.test_wizard import valid
    from workbench.runs.web.forms import RunForm

    # The page's form itself (the page renders its errors: test_wizard); 230 page renders took 18 s.
    for field in FORM_FIELD.values():
        for text in TEXT_EXTREMES:
            form = RunForm(valid(dataset, **{field: text}), user=owner, preview=True)
            assert not form.is_valid() and field in form.errors, (field, text, form.errors)


def test_it_refuses_every_extreme_from_the_command_line_naming_the_field(dataset, tmp_path):
    config = tmp_path / "config.json"
    for path in sorted(set(RANGES) - {"epochs", "batch_size", "nodes"}):
        for value in (10**400, 1e308, float("inf"), True):  # a file: json.loads reads Infinity
            config.write_text(json.dumps(_nested(path, value)))
            with pytest.raises(CommandError, match=path.replace(".", r"\.")):
                call_command("train", "--dataset", str(dataset.pk), "--network", "lenet", "--epochs", "1",
                             "--batch-size", "8", "--gpus", "cpu", "--config", str(config))  # fmt: skip
    for flag, value in (("--epochs", "inf"), ("--epochs", "1e308"), ("--lr", "nan"), ("--dataset", "9" * 400)):
        argv = {"--dataset": str(dataset.pk), "--network": "lenet", "--epochs": "1", "--batch-size": "8", flag: value}
        with pytest.raises(CommandError):
            call_command("train", *[part for pair in argv.items() for part in pair], "--gpus", "cpu")
    with pytest.raises(CommandError, match="priority: a 400-digit number is not a whole number between -100 and 100"):
        call_command("train", "--dataset", str(dataset.pk), "--network", "lenet", "--epochs", "1",
                     "--batch-size", "8", "--priority", "9" * 400)  # fmt: skip
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "field", ["gpus", "batch_sizes", "image_size", "steps", "warmup_steps", "find_limit", "channels", "num_classes"]
)
def test_it_refuses_every_extreme_in_a_benchmark_naming_the_field(api, field):
    # gpus [10**9] built a list of a billion devices (8 GB) before the range was checked.
    for value in [*(v for v in JSON_EXTREMES if v != "1"), 10**9, "9" * 5000]:  # "1": the CLI's text, taken
        sent = [value] if field in ("gpus", "batch_sizes") and not isinstance(value, list) else value
        answer = _post(api, "api-benchmarks", {field: sent})
        assert answer.status_code == 400, (field, value, answer.status_code, answer.content[:300])
        assert len(answer.content) < 400


def test_it_answers_400_to_ids_no_database_can_hold(api, dataset):
    huge = "9" * 400
    assert api.get(f"{reverse('api-runs')}?dataset={huge}").status_code == 400  # was a 500 (OverflowError)
    answer = _post(api, "api-runs", {"dataset": int(huge), "network": "lenet"})
    assert answer.status_code == 400 and "dataset" in answer.json() and len(answer.content) < 300
    assert _post(api, "api-benchmarks", {"data": f"dataset:{huge}"}).status_code == 400


def test_it_refuses_a_staff_priority_no_column_can_hold(client, staff_user, dataset):
    client.force_login(staff_user)
    dataset.owner = staff_user
    dataset.save()
    body = {"dataset": dataset.pk, "network": "lenet", "gpus": "cpu", "epochs": 1, "batch_size": 8}
    answer = _post(client, "api-runs", {**body, "priority": 10**30})
    assert answer.status_code == 400 and "priority" in answer.json()


def test_it_refuses_class_limits_no_column_can_hold(api):
    for field in ("min_per_class", "max_per_class"):
        answer = _post(api, "api-dataset-list", {"name": "x", "kind": "folder", field: 10**400})
        assert answer.status_code == 400 and field in answer.json()["errors"], answer.content[:300]


# ----------------------------------------------------------------------------- the sweep's size


def _measured(call) -> tuple[object, float, float]:
    """The answer, the CPU seconds this process spent on it (a busy machine's wall time says
    little: a linear check took 8 s of it at load 15) and the peak of Python memory allocated
    meanwhile (MB)."""
    tracemalloc.start()
    started = time.process_time()
    try:
        answer = call()
        return answer, time.process_time() - started, tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def test_it_refuses_a_huge_sweep_grid_from_its_lengths_before_building_it(api, dataset):
    # 2,000 x 2,000: 4 million combinations, 770 MB of the web process before this fix.
    grid = {"lr": [round(0.0001 * (i + 1), 6) for i in range(2000)], "batch_size": list(range(1, 2001))}
    body = {"dataset": dataset.pk, "network": "lenet", "gpus": "cpu", "epochs": 1, "sweep": grid}
    answer, seconds, peak_mb = _measured(lambda: _post(api, "api-sweeps", body))
    assert answer.status_code == 400
    assert answer.json() == {"sweep": ["lr: 2000 values; at most 32 at once"]}
    assert peak_mb < 20 and seconds < 10, (peak_mb, seconds)  # building it: 770 MB


def test_it_refuses_a_grid_of_short_lists_that_makes_too_many_runs(api, dataset):
    grid = {"lr": [0.001 * (i + 1) for i in range(30)], "batch_size": list(range(1, 31))}
    body = {"dataset": dataset.pk, "network": "lenet", "gpus": "cpu", "epochs": 1, "sweep": grid}
    answer = _post(api, "api-sweeps", body)
    assert answer.json() == {"sweep": ["The sweep makes 900 runs; at most 32 at once."]}


def test_it_refuses_a_long_sweep_list_in_linear_time(api, dataset):
    # 100,000 values (a 1.4 MB body): 54.6 s of the web process's CPU in the quadratic check.
    grid = {"lr": [1e-6 * (i + 1) for i in range(100_000)]}
    body = {"dataset": dataset.pk, "network": "lenet", "gpus": "cpu", "epochs": 1, "batch_size": 8, "sweep": grid}
    answer, seconds, _ = _measured(lambda: _post(api, "api-sweeps", body))
    assert answer.json() == {"sweep": ["lr: 100000 values; at most 32 at once"]}
    assert seconds < 15, seconds  # the quadratic check took 54.6 s


def test_it_refuses_a_long_number_list_in_the_form_in_linear_time(owner_client, dataset):
    from tests.workbench.runs.web.test_wizard import errors_of, valid

    values = ", ".join(str(1e-6 * (i + 1)) for i in range(100_000))
    started = time.process_time()  # CPU, not wall time: see _measured
    answer = owner_client.post(reverse("run-new"), valid(dataset, base_lr=values))
    assert time.process_time() - started < 15
    assert errors_of(answer)["base_lr"] == "100000 values; at most 32."


def test_it_finds_a_value_listed_twice_by_value_whatever_its_type():
    assert first_repeat([0.1, 0.01, 0.1]) == 0.1
    assert first_repeat([1, 1.0]) == 1.0  # one learning rate
    assert first_repeat([1, True]) is None  # true is no number: refused by the trainer's rules instead
    assert first_repeat([[1], {"a": 1}, [1]]) == [1]
    assert first_repeat(list(range(100_000))) is None


def test_it_refuses_to_split_a_detector_or_benchmark_it_as_a_classifier_naming_why(api, owner):
    boxes = make_dataset_row(owner, name="boxes", task="detection",
                                   labels=["square", "disc"], image_width=64, image_height=64, channels=3)  # fmt: skip
    network = "fasterrcnn_mobilenet_v3_large_320_fpn"
    body = {"dataset": boxes.pk, "network": network, "gpus": "2", "config": {"model_parallel": 2}}
    answer = _post(api, "api-runs", body)
    assert answer.status_code == 400, answer.content
    assert answer.json() == {
        "config": [
            f"model_parallel: {network} is a detection network: it trains whole on each GPU "
            "(data parallel over all of them), not split over several; give 1"
        ]
    }
    # Benchmark mode measures it (synthetic boxes, or the dataset's), but not as a classifier's data.
    on_boxes = _post(api, "api-benchmarks", {"data": f"dataset:{boxes.pk}", "networks": ["resnet18", network]})
    assert on_boxes.json()["networks"][0].startswith(f"resnet18 is not a detection network; choose one of {network}")
    split = _post(api, "api-benchmarks", {"networks": [network], "layout": "2x1"}).json()
    assert split == {"layout": [f"{network} is a detection network: it trains whole on each GPU (data parallel "
                                "over all of them), not split over several; give 1"]}  # fmt: skip
    request = validate_benchmark_request({"data": f"dataset:{boxes.pk}", "networks": [network]}, owner=owner)
    assert request["networks"] == [network] and request["dataset"] == boxes.pk
    assert not Run.objects.exists()
