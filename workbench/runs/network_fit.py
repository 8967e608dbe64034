"""Input rules on the network of a run request: it takes the dataset's images (at the crop size),
and a custom network fits the memory of the devices asked for. One home for the form, its
previews, the API, sweeps and the CLI (the rest of the input rules are in validators.py)."""

from __future__ import annotations

import functools
import json
import math
from typing import Any

from trainer.config import ALL_NETWORKS, NETWORKS, RANGES, default_of, networks_of, shown
from trainer.protocol import CLASSIFICATION, TASK_MIN_SIDE, TASK_NETWORKS, best_metric_of
from trainer.recipes import recipe_refusal, under_preset
from workbench.core.errors import RequestError
from workbench.runs.devices import DeviceRequest
from workbench.runs.validators import sweep_config
from workbench.workers.inventory import online_hosts
from workbench.workers.models import Device


def network_input(dataset, crop: Any = None) -> tuple[int, int, int, int]:
    """What a network sees of `dataset`: (channels, height, width, classes), at the crop size
    when one is given (a side the trainer would take), else the images' own size. The one place
    the new-run form, its previews, the API and the CLI compute it."""
    bounds = RANGES["data.crop_size"]
    ok = isinstance(crop, int) and not isinstance(crop, bool) and bounds.low <= crop <= bounds.high
    height, width = (crop, crop) if ok else (dataset.image_height, dataset.image_width)
    return dataset.channels, height, width, max(1, len(dataset.labels or []))


def parameter_count(network: str, shape: tuple[int, int, int, int], layers: list | None = None) -> int:
    """Parameters of `network` built for `shape` (network_input), on the meta device: no memory,
    no compute. Raises the trainer's NetworkError / CustomNetError for a network that cannot be built."""
    # torch (with the trainer) is loaded only where a network is sized, never by every web process
    import torch  # torch: loaded only where this runs

    from trainer.networks import InputSpec, build_model  # torch: loaded only where this runs
    from trainer.tasks import task_for  # torch: loaded only where this runs

    task = next((name for name, networks in TASK_NETWORKS.items() if network in networks), None)
    with torch.device("meta"):
        spec = InputSpec(*shape, layers or [])
        model = task_for(task).build_model(network, spec) if task else build_model(network, spec)
    return sum(parameter.numel() for parameter in model.parameters())


def check_network_fits(
    *, network: str, config: dict, dataset, request: DeviceRequest | None = None, memory_known: bool = True
) -> None:
    """The network can take the dataset's images, at the crop size, and a custom network fits
    the memory of the devices `request` asks for (when the executor knows it before the start,
    `memory_known`: Executor.knows_device_memory): one rule for the form, the API and the CLI
    (checked on submit, so a run that would fail at launch is never queued). Only a ready
    dataset's sizes are known; a dataset still building is checked at launch."""
    check_task_network(network=network, dataset=dataset)
    check_images_take(config=config, dataset=dataset)
    if network not in NETWORKS or dataset.status != "ready" or not dataset.image_width or not isinstance(config, dict):
        return  # an unknown network and a bad config are refused by validate_trainer_config
    # torch (with the trainer) is loaded only where a run is submitted, never by every web process
    from trainer.custom_net import CustomNetError  # torch: loaded only where this runs

    data = config.get("data")
    crop = data.get("crop_size") if isinstance(data, dict) else None
    crop = crop if isinstance(crop, int) and not isinstance(crop, bool) and crop > 0 else None
    layers = config.get("custom_layers") if isinstance(config.get("custom_layers"), list) else []
    shape = network_input(dataset, crop)
    refusal = input_refusal(network, shape, _layers_key(layers))
    if refusal:
        raise RequestError(*refusal)
    if network == "custom" and request is not None and memory_known:
        try:
            check_memory(layers=layers, shape=shape, config=config, request=request)
        except CustomNetError as error:
            raise RequestError("config.custom_layers", str(error)) from None


# Networks checked (built on the meta device and run) per process, each distinct one kept: the
# answer depends only on the network, the input and a custom network's layers, never on the rest
# of the config, so a search checking every candidate value (a learning rate, a batch) builds its
# network once, not once a value (1,024 builds, 56 s of one web thread before they were kept).
CHECKED_NETWORKS = 256


def _layers_key(layers: list) -> str:
    """A custom network's layers as a cache key (their JSON text); `[]` for any other network."""
    return json.dumps(layers, sort_keys=True, default=str)


@functools.lru_cache(maxsize=CHECKED_NETWORKS)
def input_refusal(network: str, shape: tuple[int, int, int, int], layers: str) -> tuple[str, str] | None:
    """Why `network` cannot take images of `shape` (network_input) with a custom network's
    `layers` (_layers_key), as (field, message); None when it can. Builds the network once per
    distinct key and process: `input_refusal.cache_info().misses` counts the builds."""
    from trainer.custom_net import CustomNetError  # torch: loaded only where this runs
    from trainer.networks import InputSpec, NetworkError, check_input_size  # torch: loaded only where this runs

    try:
        check_input_size(network, InputSpec(*shape, json.loads(layers)))
    except CustomNetError as error:
        return "config.custom_layers", str(error)
    except NetworkError as error:
        return ("config.custom_layers" if network == "custom" else "network"), str(error)
    return None


def check_images_take(*, config: Any, dataset) -> None:
    """The crop and the recipe's augmentations apply to the dataset's images: a crop no larger
    than they are (the random resized crop's size too), no colour jitter on grey images, no
    recipe augmentation on a detection or segmentation dataset (trainer/recipes.py's rule), and
    a best metric of the dataset's task (trainer/protocol.py's rule)."""
    if dataset.status != "ready" or not dataset.image_width or not isinstance(config, dict):
        return
    config = under_preset(config)  # a preset's fields, where the request leaves them out
    crop = _setting(config, "data.crop_size")
    width, height = dataset.image_width, dataset.image_height
    if isinstance(crop, int) and not isinstance(crop, bool) and (crop > width or crop > height):
        raise RequestError(
            "config.data.crop_size", f"{shown(crop)} is larger than the dataset images ({width}x{height})"
        )
    refusal = recipe_refusal(
        lambda path: _setting(config, path), channels=dataset.channels, task=dataset.task or CLASSIFICATION
    )
    if refusal:
        raise RequestError(f"config.{refusal[0]}", refusal[1])
    best = _setting(config, "best_metric")
    if isinstance(best, str):
        try:
            best_metric_of(dataset.task or CLASSIFICATION, best)
        except ValueError as error:
            raise RequestError("config.best_metric", str(error)) from None


def check_task_network(*, network: str, dataset) -> None:
    """The network is one of the dataset's task (a detector for a detection dataset...), and a
    detection or segmentation network takes the dataset's images: refused here, never at launch."""
    task = getattr(dataset, "task", CLASSIFICATION) or CLASSIFICATION
    if network not in ALL_NETWORKS:
        return  # an unknown name is refused by validate_trainer_config, listing every network
    allowed = networks_of(task)
    if network not in allowed:
        raise RequestError("network", f"{network} is not a {task} network; choose one of {', '.join(allowed)}")
    side = min(dataset.image_width or TASK_MIN_SIDE, dataset.image_height or TASK_MIN_SIDE)
    if task != CLASSIFICATION and side < TASK_MIN_SIDE:
        raise RequestError(
            "network",
            f"{network} needs images of at least {TASK_MIN_SIDE}x{TASK_MIN_SIDE}, "
            f"dataset is {dataset.image_width}x{dataset.image_height}",
        )


def sweep_fits(*, network: str, config: Any, grid: Any, dataset, request: DeviceRequest, memory_known: bool) -> None:
    """check_network_fits for a sweep, at its largest batch (the most memory); the grid's values
    are checked by sweep_validate."""
    batches = grid.get("batch_size") if isinstance(grid, dict) else None
    batches = (
        [b for b in batches if isinstance(b, int) and not isinstance(b, bool)] if isinstance(batches, list) else []
    )
    if batches and isinstance(config, dict):
        config = sweep_config(config, {"batch_size": max(batches)})
    check_network_fits(network=network, config=config, dataset=dataset, request=request, memory_known=memory_known)


def _setting(config: dict, path: str) -> Any:
    """The setting at `path` as the run will have it: sent, else the trainer's default."""
    owner, _, leaf = path.rpartition(".")
    part = config.get(owner) if owner else config
    return part.get(leaf, default_of(path)) if isinstance(part, dict) else default_of(path)


def _whole(value: Any) -> int:
    """A positive whole number as sent, else 0 (the trainer's own check refuses it)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _gib(size: float) -> str:
    return f"{size / 2**30:.1f} GiB"


def check_memory(*, layers: list, shape: tuple[int, int, int, int], config: dict, request: DeviceRequest) -> None:
    """A custom network's estimated training memory against the devices asked for, from the
    workers' inventory: per GPU (the smallest of specific GPUs; the largest GPU for a count, which
    the run may wait for), or the host's RAM for a CPU run. Devices no worker has reported are not
    judged. Raises RequestError on custom_layers, with the numbers."""
    # torch (with the trainer) is loaded only where a run is submitted, never by every web process
    from trainer.custom_net import training_bytes  # torch: loaded only where this runs

    processes = max(1, request.device_count // max(1, _whole(_setting(config, "model_parallel"))))
    batch = _whole(_setting(config, "batch_size")) // processes // max(1, _whole(_setting(config, "grad_accum")))
    capacity, where = _device_memory(request)
    if batch <= 0 or not capacity:
        return  # a batch the processes cannot share is refused by the trainer's own check
    parameters, outputs = _custom_size(shape, _layers_key(layers))
    weights = training_bytes(parameters)
    # Every layer's output is kept for the backward pass and gets a gradient of the same size:
    # twice, 4 bytes a value in fp32, 2 under bf16/fp16 autocast.
    value_bytes = 2 if _setting(config, "precision") in ("bf16", "fp16") else 4
    activations = 2 * value_bytes * batch * outputs
    need = weights + activations
    if need <= capacity:
        return
    raise RequestError(
        "config.custom_layers",
        f"needs about {_gib(need)} of memory per process to train ({_gib(weights)} for {parameters:,} parameters "
        f"with their gradients and optimizer state, {_gib(activations)} of activations for a batch of {batch}); "
        f"{where} {_gib(capacity)}: make the network or the batch smaller, or ask for larger devices",
    )


@functools.lru_cache(maxsize=CHECKED_NETWORKS)
def _custom_size(shape: tuple[int, int, int, int], layers: str) -> tuple[int, int]:
    """(parameters, values of all its layers' outputs for one image) of a custom network, built
    once per distinct one as input_refusal builds (the batch and precision scale them apart)."""
    from trainer.custom_net import layer_shapes  # torch: loaded only where this runs

    rows = json.loads(layers)
    return parameter_count("custom", shape, rows), sum(math.prod(row["shape"]) for row in layer_shapes(rows, *shape))


def _device_memory(request: DeviceRequest) -> tuple[int, str]:
    """(bytes, what they are in words) of the devices `request` names; 0 when unknown."""
    rows = Device.objects.filter(host__in=online_hosts(), memory_total_mb__gt=0)
    if request.is_cpu:
        # The CPU is one device: its processes share the host's RAM (one process for a CPU run).
        sizes = rows.filter(kind=Device.Kind.CPU).values_list("memory_total_mb", flat=True)
        return max(sizes, default=0) * 2**20, "the largest host's memory is"
    gpus = rows.filter(kind=Device.Kind.GPU)
    if request.is_specific:
        sizes = gpus.filter(host__hostname=request.host, index__in=request.indices).values_list(
            "memory_total_mb", flat=True
        )
        return min(sizes, default=0) * 2**20, f"the smallest of GPU {', '.join(map(str, request.indices))} has"
    if request.names_gpus:
        return max(gpus.values_list("memory_total_mb", flat=True), default=0) * 2**20, "the largest GPU has"
    return 0, ""  # "auto" not yet resolved: judged once it is (services.resolve_devices)
