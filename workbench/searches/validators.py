"""Rules on what a search is asked for: the space, the objective, the sampler and pruner, the
budget. Refusals are RequestErrors naming the field (space.lr, trials, ...), turned into form
errors, API 400 bodies and command errors by the runs' adapters; whether each value of the space
makes a valid run is checked with the runs' own rules (services.search_create)."""

from __future__ import annotations

import math
from typing import Any

from trainer.config import short_path, shown, with_setting
from trainer.protocol import CLASSIFICATION, METRIC_DIRECTION, TASK_METRICS
from workbench.core.errors import RequestError
from workbench.core.task_table import task_row
from workbench.searches.models import Search

# A parameter is a short name (trainer.config.SHORT_FIELDS: lr, solver or its alias optimizer,
# momentum, ...) or any trainer field's dotted path ("solver.gamma", "data.color_jitter");
# "network" is the run's network.
NETWORK = "network"
RANGE_TYPES = ("loguniform", "uniform", "int")
TYPES = (*RANGE_TYPES, "choice")
MAX_TRIALS = 500
# The budget a search gets when it names none: the form, the API and the CLI all start from these.
DEFAULT_TRIALS = 20
DEFAULT_PARALLEL = 2
MAX_CHOICES = 64
MAX_PARAMS = 16
# Values of the space checked as runs when a search is created (every choice, each range's two
# ends, summed over the parameters): each is a trainer config check in the web request, and a
# distinct network or image size is a network built (runs.network_fit.input_refusal); 16 x 64
# values once held a web thread for a minute.
MAX_CANDIDATES = 64


def _number(value: Any, *, field: str, integer: bool = False) -> float | int:
    try:
        finite = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    except OverflowError:  # an int past a float's range
        finite = False
    if not finite:
        raise RequestError(field, f"expected a finite number, not {shown(value)}")
    if integer:
        if value != int(value):
            raise RequestError(field, f"expected a whole number, not {value!r}")
        return int(value)
    return float(value)


def validate_param(name: Any, spec: Any) -> dict:
    """One dimension of the space, checked on its own: a range not empty, not inverted, a log
    range above 0; a list of distinct choices."""
    field = f"space.{name}"
    if not isinstance(name, str) or not name or len(name) > 64:
        raise RequestError("space", "each parameter needs a name (lr, batch_size, a trainer field's dotted path)")
    if not isinstance(spec, dict) or spec.get("type") not in TYPES:
        raise RequestError(field, f"expected an object with a type among {', '.join(TYPES)}")
    kind = spec["type"]
    if kind == "choice":
        values = spec.get("values")
        if not isinstance(values, list) or not values:
            raise RequestError(field, "a choice needs a non-empty list of values")
        if len(values) > MAX_CHOICES:
            raise RequestError(field, f"{len(values)} choices; at most {MAX_CHOICES}")
        if any(not isinstance(v, (str, int, float, bool)) for v in values):
            raise RequestError(field, "choices are numbers, words or true/false")
        if len({repr(v) for v in values}) != len(values):
            raise RequestError(field, "a value is listed twice")
        return {"type": kind, "values": values}
    integer = kind == "int"
    low = _number(spec.get("low"), field=f"{field}.low", integer=integer)
    high = _number(spec.get("high"), field=f"{field}.high", integer=integer)
    if low == high:
        raise RequestError(field, f"the range {low:g} to {high:g} is empty: give a high above the low, or a choice")
    if low > high:
        raise RequestError(field, f"the range is inverted: low {low:g} is above high {high:g}")
    log = kind == "loguniform" or (integer and bool(spec.get("log")))
    if log and low <= 0:
        raise RequestError(field, f"a log range must stay above 0 (low is {low:g})")
    cleaned = {"type": kind, "low": low, "high": high}
    if integer:
        cleaned["log"] = log
    return cleaned


def validate_space(space: Any) -> dict:
    if not isinstance(space, dict) or not space:
        raise RequestError("space", "give at least one parameter to search, e.g. lr: loguniform 1e-4 to 1e-1")
    if len(space) > MAX_PARAMS:
        raise RequestError("space", f"{len(space)} parameters; at most {MAX_PARAMS}")
    cleaned = {name: validate_param(name, spec) for name, spec in space.items()}
    values = sum(len(candidate_values(spec)) for spec in cleaned.values())
    if values > MAX_CANDIDATES:
        raise RequestError(
            "space", f"{values} values to check (every choice, each range's two ends); at most {MAX_CANDIDATES}"
        )
    return cleaned


def candidate_values(spec: dict) -> list:
    """The values of one dimension that stand for all of it in the run validators: every choice,
    a range's two ends."""
    return list(spec["values"]) if spec["type"] == "choice" else [spec["low"], spec["high"]]


def trial_request(*, network: str, config: dict, params: dict) -> tuple[str, dict]:
    """A trial's network and trainer config: the base with the parameters put at their paths."""
    for name, value in params.items():
        if name == NETWORK:
            network = value
            continue
        config = with_setting(config, param_path(name), value)
    return network, config


def param_path(name: str) -> str:
    """Where a parameter goes in the trainer config: a short name's path, else the name itself."""
    return short_path(name) or name


def config_path(name: str) -> str:
    """Where a parameter lands in a run request, as the run validators name it."""
    return NETWORK if name == NETWORK else f"config.{param_path(name)}"


def validate_budget(*, trials: Any, parallel: Any, gpu_hours: Any) -> tuple[int, int, float | None]:
    trials = _number(trials, field="trials", integer=True)
    if not 1 <= trials <= MAX_TRIALS:
        raise RequestError("trials", f"between 1 and {MAX_TRIALS}")
    parallel = _number(parallel, field="parallel", integer=True)
    if not 1 <= parallel <= trials:
        raise RequestError("parallel", f"between 1 and the trials ({trials})")
    if gpu_hours is not None:
        gpu_hours = _number(gpu_hours, field="gpu_hours")
        if gpu_hours <= 0:
            raise RequestError("gpu_hours", "a cap above 0, or none")
    return trials, parallel, gpu_hours


def validate_seed(seed: Any) -> int | None:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31):
        raise RequestError("seed", "a whole number from 0 to 2147483647, or none")
    return seed


def validate_strategy(
    *, objective: Any, direction: Any, sampler: Any, pruner: Any, space: dict, task: str = CLASSIFICATION
) -> tuple[str, ...]:
    """Objective (one of the dataset's task's metrics; none given: its row's search_objective, val
    loss for a classifier, the task's first metric otherwise), direction (default: what the
    objective wants), sampler, pruner."""
    metrics = TASK_METRICS.get(task, TASK_METRICS[CLASSIFICATION])
    if objective in (None, ""):
        objective = task_row(task).search_objective
    if objective not in metrics:
        raise RequestError("objective", f"one of {', '.join(metrics)} (the {task} dataset's metrics)")
    if direction in (None, ""):
        direction = Search.Direction.MAXIMIZE if METRIC_DIRECTION[objective] == "max" else Search.Direction.MINIMIZE
    if direction not in Search.Direction.values:
        raise RequestError("direction", f"one of {', '.join(Search.Direction.values)}")
    if sampler not in Search.Sampler.values:
        raise RequestError("sampler", f"one of {', '.join(Search.Sampler.values)}")
    if pruner not in Search.Pruner.values:
        raise RequestError("pruner", f"one of {', '.join(Search.Pruner.values)}")
    if sampler == Search.Sampler.GRID:
        ranged = [name for name, spec in space.items() if spec["type"] != "choice"]
        if ranged:
            raise RequestError(
                "sampler", f"a grid needs a list of choices for every parameter ({ranged[0]} is a range)"
            )
    if sampler == Search.Sampler.CMAES and all(spec["type"] == "choice" for spec in space.values()):
        raise RequestError("sampler", "CMA-ES needs at least one range (a number to move); use tpe or random")
    return objective, direction, sampler, pruner


def parse_param(text: str) -> tuple[str, dict]:
    """The command line's --param: "lr=loguniform:1e-4:1e-1", "batch_size=choice:32,64",
    "momentum=uniform:0.8:0.99", "epochs=int:1:4"; numbers in choices are read as numbers."""
    name, sep, rest = text.partition("=")
    kind, _, values = rest.partition(":")
    if not sep or not name or kind not in TYPES:
        raise RequestError("param", f"{text!r}: expected NAME=TYPE:..., TYPE among {', '.join(TYPES)}")
    if kind == "choice":
        return name, {"type": kind, "values": [_word_or_number(v) for v in values.split(",") if v != ""]}
    low, _, high = values.partition(":")
    # Text that is not a number is kept, for validate_param to refuse by the field's name.
    return name, {"type": kind, "low": _word_or_number(low), "high": _word_or_number(high)}


def _word_or_number(text: str) -> str | int | float:
    for kind in (int, float):
        try:
            value = kind(text)
        except ValueError:
            continue
        return value if math.isfinite(value) else text
    return text
