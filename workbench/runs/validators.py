"""Checks on what users ask for: device requests and trainer configs, with messages that name the field."""

from __future__ import annotations

import re
from typing import Any

from trainer.config import ConfigError, config_from_dict


class RequestError(ValueError):
    """Bad input; the message names the field and what is allowed."""


# One answer for every pretrained source refused: a missing upload, someone else's run, a path,
# a symlink all read the same, so the API cannot be used to learn what exists on the server.
PRETRAINED_REFUSED = (
    "config: pretrained: no such weights you can use; give upload:<id> (an upload of yours, "
    "POST /api/pretrained/) or run:<id> / run:<id>:last (a run you can see)"
)
_REFERENCE = re.compile(r"upload:(?P<upload>[1-9]\d{0,17})|run:(?P<run>[1-9]\d{0,17})(?::(?P<which>best|last))?")

_SPECIFIC = re.compile(r"^(?P<host>[^:\s]+):(?P<indices>\d+(?:,\d+)*)$")


def parse_device_request(text: str | int | None) -> dict:
    """`auto` | `cpu` | `N` | `HOST:0,1` -> the stored device request."""
    value = "auto" if text is None else str(text).strip()
    if value.lower() == "auto":
        return {"kind": "auto"}
    if value.lower() == "cpu":
        return {"kind": "cpu"}
    if value.isdigit():
        count = int(value)
        if not 1 <= count <= 64:
            raise RequestError(f"gpus: {count} is not between 1 and 64")
        return {"kind": "count", "count": count}
    match = _SPECIFIC.match(value)
    if match:
        indices = [int(i) for i in match.group("indices").split(",")]
        if len(set(indices)) != len(indices):
            raise RequestError(f"gpus: {value!r} names a GPU twice")
        return {"kind": "specific", "host": match.group("host"), "indices": indices}
    raise RequestError(f"gpus: {value!r} is not one of auto, cpu, a count such as 2, or HOST:0,1")


def resolve_auto(request: dict, *, gpus_online: bool) -> dict:
    """`auto` means one GPU when any online worker has GPUs, else the CPU."""
    if request.get("kind") != "auto":
        return request
    return {"kind": "count", "count": 1} if gpus_online else {"kind": "cpu"}


def device_count(request: dict) -> int:
    """Devices a request asks for (the CPU counts as one)."""
    if request.get("kind") == "count":
        return int(request["count"])
    if request.get("kind") == "specific":
        return len(request["indices"])
    return 1


def check_model_parallel(model_parallel: Any, request: dict) -> None:
    """A network split over several devices needs GPUs, in groups of `model_parallel`; the
    trainer's own check (on validate_trainer_config's probe) covers the value's type and range."""
    if not isinstance(model_parallel, int) or isinstance(model_parallel, bool) or model_parallel <= 1:
        return
    if request.get("kind") not in ("count", "specific"):
        raise RequestError(
            "config: model_parallel: splitting the network needs several GPUs; "
            "ask for a number of GPUs or for specific GPUs"
        )
    count = device_count(request)
    if count % model_parallel:
        raise RequestError(
            f"config: model_parallel: {count} GPU(s) cannot form groups of {model_parallel}; "
            f"ask for a multiple of {model_parallel} GPUs"
        )


def check_pretrained(value: Any, *, owner, network: str):
    """The rule for what a run may start from, without touching any file: an upload of `owner`'s
    (staff: anyone's) or a run `owner` may see, by reference. Returns the PretrainedWeights row or
    (run, "best"|"last"); anything else raises RequestError(PRETRAINED_REFUSED)."""
    from workbench.runs.models import PretrainedWeights
    from workbench.runs.pretrained import checkpoint_of, inside_store
    from workbench.runs.selectors import runs_visible_to

    match = _REFERENCE.fullmatch(value) if isinstance(value, str) and owner is not None else None
    if match is None:
        raise RequestError(PRETRAINED_REFUSED)
    if match.group("upload"):
        uploads = PretrainedWeights.objects.all()
        uploads = uploads if owner.is_staff else uploads.filter(owner=owner)
        weights = uploads.filter(pk=int(match.group("upload"))).first()
        if weights is None or not inside_store(weights.file):
            raise RequestError(PRETRAINED_REFUSED)
        return weights
    run = runs_visible_to(owner).filter(pk=int(match.group("run"))).first()
    if run is None:
        raise RequestError(PRETRAINED_REFUSED)
    # From here on the run is the user's to see: naming what is wrong with it tells nothing new.
    which = match.group("which") or "best"
    if run.network != network:
        raise RequestError(
            f"config: pretrained: run #{run.pk} trained a {run.network}; "
            f"choose network {run.network} to start from its weights"
        )
    if checkpoint_of(run, which) is None:
        raise RequestError(f"config: pretrained: run #{run.pk} has no checkpoint yet")
    return run, which


def resolve_pretrained(value: Any, *, owner, network: str) -> str:
    """check_pretrained, then the file the trainer is to read (a run's weights copied out)."""
    from workbench.runs.pretrained import PretrainedError, weights_from_run

    source = check_pretrained(value, owner=owner, network=network)
    if isinstance(source, tuple):
        run, which = source
        try:
            source = weights_from_run(owner=owner, run=run, which=which)
        except PretrainedError as error:
            raise RequestError(f"config: pretrained: {error}") from None
    return str(source.file)


def validate_trainer_config(config: dict, *, network: str, request: dict, owner=None) -> dict:
    """Validates with the trainer's own rules (names the bad field) for the devices `request`
    asks for; returns the config to store, its `pretrained` reference resolved to the file for
    `owner` (a config naming weights without an owner is refused)."""
    if not isinstance(config, dict):
        raise RequestError("config: expected an object")
    config = {**config}
    pretrained = config.pop("pretrained", None)
    for reserved in ("run_dir", "devices", "network"):
        if reserved in config:
            raise RequestError(f"config.{reserved}: set by the workbench, leave it out")
    if "dataset" in (config.get("data") or {}):
        raise RequestError("config.data.dataset: set by the workbench from the chosen dataset")
    check_model_parallel(config.get("model_parallel"), request)
    count = device_count(request) if request.get("kind") != "auto" else 1
    probe = {
        **config,
        "network": network,
        "pretrained": None,  # resolved below by the server; the trainer checks the file at launch
        "run_dir": "/nonexistent/run",
        "devices": ["cpu"] * count,
        "data": {**(config.get("data") or {}), "dataset": "/nonexistent/dataset"},
    }
    if probe.get("precision") == "fp16":
        probe["devices"] = list(range(count))  # fp16 is checked against CUDA at launch
    try:
        config_from_dict(probe, check_paths=False)
    except ConfigError as error:
        raise RequestError(f"config: {error}") from None
    except TypeError as error:
        raise RequestError(f"config: {error}") from None
    if pretrained not in (None, ""):
        # Last, once the rest is valid: a run's weights are copied out only for a run that is queued.
        config["pretrained"] = resolve_pretrained(pretrained, owner=owner, network=network)
    return config
