"""Checks on what users ask for: device requests and trainer configs. Every refusal is a
RequestError of (field, message) pairs; the three ways out (form errors, DRF 400 bodies,
management-command errors) are the adapters of workbench/core/adapters.py."""

from __future__ import annotations

import itertools
import json
import math
import re
from typing import Any

from django import forms

from trainer.config import (
    LAUNCH_FIELDS,
    RANGES,
    ConfigError,
    TrainConfig,
    config_from_dict,
    plain_number,
    settings_of,
    short_path,
    shown,
    with_setting,
)
from trainer.preflight import DatasetFacts, preflight
from trainer.protocol import CLASSIFICATION, layout_refusal
from workbench.core.errors import NotAllowed, RequestError
from workbench.runs.devices import DeviceRequest
from workbench.weights.references import reference_check, reference_preprocessing

_SPECIFIC = re.compile(r"^(?P<host>[^:\s]+):(?P<indices>\d+(?:,\d+)*)$")


def parse_device_request(text: str | int | None) -> DeviceRequest:
    """`auto` | `cpu` | `N` | `HOST:0,1` -> the device request, RequestError on "gpus" if not."""
    value = "auto" if text is None else str(text).strip()
    if value.lower() == "auto":
        return DeviceRequest.auto()
    if value.lower() == "cpu":
        return DeviceRequest.cpu()
    if value.isdigit():
        count = int(value)
        if not 1 <= count <= 64:
            raise RequestError("gpus", f"{count} is not between 1 and 64")
        return DeviceRequest.gpus(count)
    match = _SPECIFIC.match(value)
    if match:
        indices = [int(i) for i in match.group("indices").split(",")]
        if len(set(indices)) != len(indices):
            raise RequestError("gpus", f"{value!r} names a GPU twice")
        return DeviceRequest.on_host(match.group("host"), indices)
    raise RequestError("gpus", f"{value!r} is not one of auto, cpu, a count such as 2, or HOST:0,1")


MAX_NODES = 64


def check_nodes(nodes: Any) -> int:
    """How many nodes a run spans, as a whole number from 1 to MAX_NODES (whether the executor
    can span several is the executor's own rule: executors.check_executor)."""
    nodes = 1 if nodes in (None, "") else nodes
    if isinstance(nodes, str) and nodes.strip().isdigit():
        nodes = int(nodes)
    if not isinstance(nodes, int) or isinstance(nodes, bool) or not 1 <= nodes <= MAX_NODES:
        raise RequestError("nodes", f"{nodes!r} is not a whole number between 1 and {MAX_NODES}")
    return nodes


def check_model_parallel(model_parallel: Any, request: DeviceRequest, network: str | None = None) -> None:
    """A network split over several devices needs GPUs, in groups of `model_parallel`, and a
    network that can be split (not a detector's or a segmentation network's); the trainer's own
    check (on validate_trainer_config's probe) covers the value's type and range."""
    if not isinstance(model_parallel, int) or isinstance(model_parallel, bool) or model_parallel <= 1:
        return
    refusal = layout_refusal(network, model_parallel) if network else None
    if refusal:
        raise RequestError("config.model_parallel", refusal)
    if not request.names_gpus:
        raise RequestError(
            "config.model_parallel",
            "splitting the network needs several GPUs; ask for a number of GPUs or for specific GPUs",
        )
    count = request.device_count
    if count % model_parallel:
        raise RequestError(
            "config.model_parallel",
            f"{count} GPU(s) cannot form groups of {model_parallel}; ask for a multiple of {model_parallel} GPUs",
        )


def check_pretrained(value: Any, *, owner, network: str) -> str:
    """The rule for what a run may start from (workbench/weights/references.py, the grammar's one
    home): there, visible to `owner`, fits `network`. Reads only, never a file's content, writes
    nothing; returns the reference as the run stores it. Refusals are WeightsReferenceError, a
    RequestError on config.pretrained."""
    return str(reference_check(value, owner=owner, network=network))


def validate_trainer_config(
    config: dict,
    *,
    network: str,
    request: DeviceRequest,
    owner=None,
    nodes: int = 1,
    with_weights: bool = False,
    dataset=None,
) -> dict:
    """Validates with the trainer's own rules (names the bad field) for the devices `request`
    asks for on each of `nodes` nodes, and against `dataset` by the trainer's pre-flight; returns
    the config to store, its `pretrained` reference checked for `owner` and stored as it is (a
    config naming weights without an owner is refused). `with_weights`: weights checked apart (the
    form's) are to come, for the fine-tuning fields."""
    if not isinstance(config, dict):
        raise RequestError("config", "expected an object")
    sent, config = config, {**config}
    pretrained = config.pop("pretrained", None)
    for reserved in LAUNCH_FIELDS:
        parent, _, leaf = reserved.rpartition(".")
        part = config.get(parent) if parent else config
        if isinstance(part, dict) and leaf in part:
            why = "from the chosen dataset" if reserved == "data.dataset" else "leave it out"
            raise RequestError(f"config.{reserved}", f"set by the workbench, {why}")
    check_model_parallel(config.get("model_parallel"), request, network)
    count = request.device_count
    probe = {
        **config,
        "network": network,
        # Resolved below by the server (the trainer checks the file at launch); a stand-in here, so
        # that the fine-tuning fields, which need weights, are checked with the rest.
        "pretrained": "weights" if with_weights or pretrained not in (None, "") else None,
        "run_dir": "/nonexistent/run",
        "devices": ["cpu"] * count,
        "nodes": nodes,
        "data": {**(config.get("data") or {}), "dataset": "/nonexistent/dataset"},
    }
    if probe.get("precision") == "fp16" and not request.is_cpu:
        probe["devices"] = list(range(count))  # which GPUs is known at launch; that they are GPUs, now
    try:
        cfg = config_from_dict(probe, check_paths=False)
    except ConfigError as error:
        raise RequestError(f"config.{error.field}" if error.field else "config", error.message) from None
    except TypeError as error:
        raise RequestError("config", str(error)) from None
    if dataset is not None:
        check_preflight(cfg, dataset)
    # What is stored: every setting the run trains with, sent or defaulted (the trainer's
    # defaults), so the same run reads the same whether the form, the API or the CLI made it.
    config = settings_of(cfg)
    config.pop("pretrained", None)  # the stand-in, never stored
    if pretrained not in (None, ""):
        # The reference is stored, never a path: the file is resolved at launch (attempts/config.py).
        config["pretrained"] = check_pretrained(pretrained, owner=owner, network=network)
        # The weights' own normalisation, unless the request set one.
        own = {k: v for k, v in reference_preprocessing(pretrained).items() if (sent.get("data") or {}).get(k) is None}
        config["data"] = {**config["data"], **own}
    return config


def preflight_facts(dataset) -> DatasetFacts:
    """What the trainer's pre-flight knows of a dataset row: its task, and its images' size and
    training images once it is ready (a dataset still building is judged at launch)."""
    ready = dataset.status == "ready" and bool(dataset.image_width and dataset.image_height)
    return DatasetFacts(
        task=dataset.task or CLASSIFICATION,
        channels=dataset.channels or 3,
        width=dataset.image_width if ready else 0,
        height=dataset.image_height if ready else 0,
        classes=max(1, len(dataset.labels or [])),
        train_images=int((dataset.splits or {}).get("train", {}).get("count", 0)) if ready else 0,
    )


def check_preflight(cfg: TrainConfig, dataset) -> None:
    """The trainer's pre-flight (trainer/preflight.py) of a validated config on `dataset`, at
    submit: every refusal in the words the engine would fail the run with at launch."""
    errors = preflight(cfg, preflight_facts(dataset))
    if errors:
        # The network is a field of the request itself; every other setting is under config.
        raise RequestError.of([(e.field if e.field == "network" else f"config.{e.field}", e.message) for e in errors])


MAX_PRIORITY = 100  # priorities run from -MAX_PRIORITY to MAX_PRIORITY (staff only)


def check_priority(value: Any, *, by_staff: bool) -> int:
    """The one rule for a run's priority (the form, the API's create and change, the CLI): a
    whole number from -MAX_PRIORITY to MAX_PRIORITY, other than 0 only when staff set it. The
    command line is the server's operator, as staff."""
    if value in (None, ""):
        return 0
    if isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not -MAX_PRIORITY <= value <= MAX_PRIORITY:
        raise RequestError(
            "priority", f"{shown(value)} is not a whole number between -{MAX_PRIORITY} and {MAX_PRIORITY}"
        )
    if value and not by_staff:
        raise NotAllowed("priority", "only staff can set a priority")
    return value


# ----------------------------------------------------------------------------- sweeps

MAX_SWEEP_RUNS = 32
# What a sweep may vary, as the new-run form offers it: short names (trainer.config.SHORT_FIELDS
# says where each goes). A sweep may vary the preset too (trainer/recipes.py): each run's fields
# the request leaves out are that run's preset's.
SWEEP_FIELDS = ("lr", "batch_size", "preset")


def sweep_combinations(grid: Any) -> list[dict[str, Any]]:
    """{"lr": [0.1, 0.01], "batch_size": [32]} -> [{"lr": 0.1, "batch_size": 32}, {"lr": 0.01, ...}]
    (learning rate first, as the form lists them); the values are checked per combination by
    sweep_validate, with the trainer's rules."""
    if not isinstance(grid, dict) or not grid:
        raise RequestError("sweep", f"expected an object of lists of values, keys among {', '.join(SWEEP_FIELDS)}")
    unknown = sorted(set(grid) - set(SWEEP_FIELDS), key=str)
    if unknown:
        raise RequestError(f"sweep.{unknown[0]}", f"cannot be swept (these can: {', '.join(SWEEP_FIELDS)})")
    lists = {key: grid[key] for key in SWEEP_FIELDS if key in grid}
    for key, values in lists.items():
        if not isinstance(values, list) or not values:
            raise RequestError(f"sweep.{key}", "expected a non-empty list of values")
        # The count first, from the lengths alone: a 2,000 x 2,000 grid is refused before any of
        # its 4 million combinations exists (building them cost the web process 770 MB).
        if len(values) > MAX_SWEEP_RUNS:
            raise RequestError(f"sweep.{key}", f"{len(values)} values; at most {MAX_SWEEP_RUNS} at once")
    runs = math.prod(len(values) for values in lists.values())
    if runs > MAX_SWEEP_RUNS:
        raise RequestError("sweep", f"The sweep makes {runs} runs; at most {MAX_SWEEP_RUNS} at once.")
    for key, values in lists.items():
        twice = first_repeat(values)
        if twice is not None:
            raise RequestError(f"sweep.{key}", f"{shown(twice)} is listed twice")
    return [dict(combination) for combination in itertools.product(*([(k, v) for v in vs] for k, vs in lists.items()))]


def first_repeat(values: list) -> Any:
    """The first value listed again, or None; linear (a set of keys), for any JSON values. Numbers
    compare by value (0.1 and 0.10, 1 and 1.0 are one learning rate), booleans and others apart."""
    seen: set = set()
    for value in values:
        if isinstance(value, int | float) and not isinstance(value, bool):
            key: Any = value
        else:
            key = (type(value).__name__, json.dumps(value, sort_keys=True, default=str))
        if key in seen:
            return value
        seen.add(key)
    return None


def sweep_config(config: dict, combination: dict[str, Any]) -> dict:
    """`config` with the combination's values put at their paths (config is left as it was)."""
    for key, value in combination.items():
        config = with_setting(config, short_path(key), value)
    return config


def sweep_validate(
    *,
    config: dict,
    grid: Any,
    network: str,
    request: DeviceRequest,
    owner=None,
    nodes: int = 1,
    with_weights: bool = False,
    dataset=None,
) -> list[tuple[dict, dict]]:
    """Every combination of `grid` applied to `config` and validated as one run would be, before
    any is created: [(combination, config to store)]; an error on a swept value names sweep.<key>."""
    if not isinstance(config, dict):
        raise RequestError("config", "expected an object")
    combinations = sweep_combinations(grid)
    for key in combinations[0]:
        *parents, leaf = short_path(key).split(".")
        node = config
        for parent in parents:
            node = node.get(parent) if isinstance(node.get(parent), dict) else {}
        if leaf in node:
            raise RequestError(f"config.{short_path(key)}", f"given by the sweep (sweep.{key}); leave it out here")
    checked = []
    for combination in combinations:
        try:
            stored = validate_trainer_config(
                sweep_config(config, combination),
                network=network,
                request=request,
                owner=owner,
                nodes=nodes,
                with_weights=with_weights,
                dataset=dataset,
            )
        except RequestError as error:
            swept = {f"config.{short_path(key)}": key for key in combination}
            pairs = [(f"sweep.{swept[field]}" if field in swept else field, text) for field, text in error.errors]
            raise RequestError.of(pairs) from None
        checked.append((combination, stored))
    return checked


# ----------------------------------------------------------------------------- numbers in forms

# What the form takes as a number: plain decimals. float() and int() also take "1_000", "inf",
# "nan" and a 400-digit text, which the trainer then refuses or a run failed on at launch.
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d{1,3})?")
_WHOLE = re.compile(r"[+-]?\d{1,18}")


def _plain(text: str, *, integer: bool) -> bool:
    return bool((_WHOLE if integer else _DECIMAL).fullmatch(text.strip()))


class DecimalTextField(forms.FloatField):
    def to_python(self, value):
        if value not in self.empty_values and not _plain(str(value), integer=False):
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        return super().to_python(value)


class WholeTextField(forms.IntegerField):
    def to_python(self, value):
        if value not in self.empty_values and not _plain(str(value), integer=True):
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        return super().to_python(value)


def trainer_number(path: str, **kwargs) -> forms.Field:
    """A form field for the trainer's field `path`, bounded by the trainer's own RANGES (the form
    may start higher, as for epochs, never go past them)."""
    bounds = RANGES[path]
    field = WholeTextField if bounds.integer else DecimalTextField
    return field(min_value=kwargs.pop("min_value", bounds.low), max_value=bounds.high, **kwargs)


def number_list(raw: str, *, path: str, label: str, most: int = MAX_SWEEP_RUNS) -> list:
    bounds = RANGES[path]
    parts = [p.strip() for p in str(raw).replace(";", ",").split(",")]
    parts = [p for p in parts if p]
    # The count first, then linear checks: a 100,000-value list costs nothing before its refusal.
    if len(parts) > most:
        raise forms.ValidationError(f"{len(parts)} values; at most {most}.")
    values, seen = [], set()
    for part in parts:
        if not _plain(part, integer=bounds.integer):
            raise forms.ValidationError(f"{shown(part)} is not a {label}.")
        value = int(part) if bounds.integer else float(part)
        if not bounds.low <= value <= bounds.high:
            low_text, high_text = plain_number(bounds.low), plain_number(bounds.high)
            raise forms.ValidationError(f"{shown(value)} must be between {low_text} and {high_text}.")
        if value not in seen:
            seen.add(value)
            values.append(value)
    if not values:
        raise forms.ValidationError("Enter a value (several separated by commas make a sweep).")
    return values
