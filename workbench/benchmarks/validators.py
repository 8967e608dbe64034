"""Every rule on a benchmark request, for the form, `POST /api/benchmarks/` and `manage.py
benchmark` alike: each refusal a RequestError of (field, message) pairs (the adapters of
workbench/runs/validators.py turn it into form errors, 400 bodies and command errors)."""

from __future__ import annotations

import re
from typing import Any

from datasets.models import Dataset
from datasets.selectors import datasets_visible_to
from trainer.bench.config import MAX_GPUS, MODES, SYNTHETIC, BenchmarkConfig, parse_layout, validate_benchmark
from trainer.config import ConfigError, shown
from trainer.preflight import side_refusal, task_network_refusal
from workbench.benchmarks.models import DEFAULT_TIME_BUDGET_MINUTES
from workbench.core.errors import RequestError
from workbench.core.ids import parse_id
from workbench.runs.validators import preflight_facts

DEFAULTS: dict[str, Any] = {
    "networks": ["resnet50"],
    "image_size": 224,
    "gpus": [1],
    "batch_sizes": [32, 64],
    "precision": "fp32",
    "data": SYNTHETIC,
    "layout": "data",
    "steps": 10,
    "warmup_steps": 3,
    "modes": ["train"],
    "find_largest": False,
    "find_limit": 4096,  # the largest batch the finder tries
    "channels": 3,  # synthetic images' channels and classes (a dataset's, for the run form's finder)
    "num_classes": 1000,
    # How long it may hold its GPUs (the queue counts on it for the runs behind it): minutes.
    "time_budget_minutes": DEFAULT_TIME_BUDGET_MINUTES,
}
MAX_TIME_BUDGET_MINUTES = 24 * 60
FIELDS = (*DEFAULTS, "name")
# The request's names for the trainer's config fields, so a trainer refusal names what was sent.
_FIELD_OF = {"networks": "networks", "gpu_counts": "gpus", "precisions": "precision", "model_parallel": "layout"}


def int_list(value: Any) -> Any:
    """ "1,2,4" -> [1, 2, 4] (the CLI and the form send text; the API sends lists)."""
    if isinstance(value, str):
        parts = [part for part in re.split(r"[\s,]+", value.strip()) if part]
        return [whole(part) for part in parts]
    return value


def whole(text: str) -> int | str:
    """Decimal text -> int; anything else (a 5,000-digit text too, which int() refuses with a
    ValueError) is left as sent, for the trainer's check to refuse by name."""
    return int(text) if text.isdecimal() and text.isascii() and len(text) <= 18 else text


def name_list(value: Any) -> Any:
    if isinstance(value, str):
        return [part for part in re.split(r"[\s,]+", value.strip()) if part]
    return value


def _dataset_of(value: str, owner) -> Dataset | None:
    """`synthetic` -> None; `dataset:<id>` -> the owner's ready dataset."""
    if value == SYNTHETIC:
        return None
    match = re.fullmatch(r"dataset:(\d+)", str(value))
    if not match:
        raise RequestError("data", "give 'synthetic' or 'dataset:<id>' (a dataset of yours)")
    pk = parse_id(match.group(1))
    dataset = datasets_visible_to(owner).filter(pk=pk).first() if pk else None
    if dataset is None:
        raise RequestError("data", f"no dataset {shown(int(match.group(1)[:400]))} of yours")
    if dataset.status != Dataset.Status.READY:
        raise RequestError("data", f"dataset {dataset.pk} is {dataset.status}, not ready")
    return dataset


def _check_networks_take(networks: list[str], dataset: Dataset | None) -> None:
    """Every network measured on a dataset is of the dataset's task and takes its images (the
    trainer's pre-flight rules, as for a run); synthetic data is made for each network's task."""
    facts = preflight_facts(dataset) if dataset is not None else None
    for network in networks if facts is not None else []:
        refusal = task_network_refusal(network, facts.task) or side_refusal(network, facts)
        if refusal:
            raise RequestError("networks", refusal.message)


def _check_config(cfg: BenchmarkConfig, dataset: Dataset | None) -> None:
    """The trainer's own check of the config, then the dataset's task and images against each
    network (after the names: a misspelt network is refused as unknown, not as another task's)."""
    try:
        validate_benchmark(cfg, check_paths=False)
    except ConfigError as error:
        raise RequestError(_FIELD_OF.get(error.field or "", error.field), error.message) from None
    _check_networks_take(cfg.networks, dataset)


def _layout(value: Any, gpus: list) -> tuple[str, int]:
    try:
        stages, groups = parse_layout(str(value))
    except ConfigError as error:
        raise RequestError("layout", error.message) from None
    if groups is not None and gpus != [stages * groups] and gpus != DEFAULTS["gpus"]:
        raise RequestError("layout", f"{value} uses {stages * groups} GPUs; leave gpus out or give {stages * groups}")
    return ("data" if stages == 1 else f"{stages}x{groups or 1}"), stages


def validate_benchmark_request(data: dict[str, Any], *, owner) -> dict[str, Any]:
    """The cleaned request (what Benchmark.request stores), or RequestError naming the field."""
    if not isinstance(data, dict):
        raise RequestError(None, "expected an object")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise RequestError(unknown[0], f"unknown field (known: {', '.join(FIELDS)})")
    request = {**DEFAULTS, **{k: v for k, v in data.items() if v not in (None, "")}}
    for key in ("gpus", "batch_sizes"):
        request[key] = int_list(request[key])
    for key in ("image_size", "steps", "warmup_steps", "find_limit", "channels", "num_classes"):
        if isinstance(request[key], str):
            request[key] = whole(request[key].strip())
    if isinstance(request["find_largest"], str):
        request["find_largest"] = request["find_largest"].lower() in ("1", "true", "yes", "on")
    request["networks"] = name_list(request["networks"])
    request["modes"] = name_list(request["modes"])
    if request["modes"] == ["both"]:
        request["modes"] = list(MODES)
    request["layout"], stages = _layout(request["layout"], request["gpus"])
    if stages > 1 and request["gpus"] == DEFAULTS["gpus"]:
        request["gpus"] = [stages * int(request["layout"].split("x")[1])]
    dataset = _dataset_of(request["data"], owner)
    cfg = BenchmarkConfig(
        run_dir="(checked later)",
        networks=request["networks"],
        image_size=request["image_size"],
        # As many devices as the widest column: what the scheduler will grant. Never more than a
        # benchmark may ask for, so gpus [10**9] is refused by the trainer's check of gpu_counts
        # instead of first building a list of a billion devices (8 GB) in the web process.
        devices=list(range(min(MAX_GPUS, max([g for g in request["gpus"] if isinstance(g, int)] or [1])))),
        gpu_counts=request["gpus"],
        batch_sizes=request["batch_sizes"],
        precisions=[request["precision"]],
        modes=request["modes"],
        model_parallel=stages,
        steps=request["steps"],
        warmup_steps=request["warmup_steps"],
        find_limit=request["find_limit"],
        channels=request["channels"],
        num_classes=request["num_classes"],
    )
    _check_config(cfg, dataset)
    request["time_budget_minutes"] = _whole(
        request, "time_budget_minutes", DEFAULT_TIME_BUDGET_MINUTES, 1, MAX_TIME_BUDGET_MINUTES
    )
    if not isinstance(request["find_largest"], bool):
        raise RequestError("find_largest", "must be true or false")
    return {
        **request,
        "name": _name(request, cfg),
        "networks": cfg.networks,
        "gpus": cfg.gpu_counts,
        "batch_sizes": cfg.batch_sizes,
        "modes": cfg.modes,
        "dataset": dataset.pk if dataset else None,
    }


def _name(request: dict[str, Any], cfg: BenchmarkConfig) -> str:
    name = str(request.get("name") or f"{', '.join(cfg.networks)} {request['precision']} x{max(cfg.gpu_counts)}")
    if len(name) > 200:
        raise RequestError("name", "at most 200 characters")
    return name


# ----------------------------------------------------------------------------- the run form's finder

FINDER_FIELDS = ("dataset", "network", "crop_size", "precision", "gpus", "model_parallel")


def _whole(data: dict, name: str, default: int, low: int, high: int) -> int:
    value = data.get(name)
    if value in (None, ""):
        return default
    if isinstance(value, str):
        value = whole(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RequestError(name, f"{shown(value)} is not a whole number from {low} to {high}")
    return value


def largest_batch_request(data: dict[str, Any], *, owner) -> tuple[dict[str, Any], int]:
    """The new-run form's "find the largest batch": a one-cell benchmark that finds it for the
    run's network, image size (the dataset's, or its crop), precision and GPUs; the request for
    validate_benchmark_request and the processes the run's global batch is split over."""
    if not isinstance(data, dict):
        raise RequestError(None, "expected an object")
    unknown = sorted(set(data) - set(FINDER_FIELDS))
    if unknown:
        raise RequestError(unknown[0], f"unknown field (known: {', '.join(FINDER_FIELDS)})")
    if parse_id(data.get("dataset", "")) is None:
        raise RequestError("dataset", "give the id of a ready dataset of yours")
    dataset = _dataset_of(f"dataset:{parse_id(data['dataset'])}", owner)
    network = data.get("network")
    if network == "custom":
        raise RequestError("network", "the finder measures the built-in networks, not a custom one")
    gpus = _whole(data, "gpus", 1, 1, 64)
    stages = _whole(data, "model_parallel", 1, 1, 64)
    if gpus % stages:
        raise RequestError("model_parallel", f"{gpus} GPU(s) cannot form groups of {stages}")
    crop = _whole(data, "crop_size", 0, 0, 4096)
    # Not square: the longer side, so the batch found fits the real images too.
    side = crop or max(dataset.image_width, dataset.image_height)
    processes = gpus // stages
    train = int((dataset.splits or {}).get("train", {}).get("count", 0))
    request = {
        "name": f"largest batch: {network} {side}px {data.get('precision') or 'fp32'} x{gpus}",
        "networks": [network],
        "image_size": side,
        "channels": dataset.channels,
        "num_classes": max(2, len(dataset.labels or [])),
        "gpus": [gpus],
        "batch_sizes": [1],
        "precision": data.get("precision") or "fp32",
        "layout": "data" if stages == 1 else f"{stages}x{processes}",
        "steps": 1,
        "warmup_steps": 0,
        "find_largest": True,
        # No batch beyond the training set: the run could not use it.
        "find_limit": max(1, train // processes) if train else DEFAULTS["find_limit"],
    }
    return request, processes
