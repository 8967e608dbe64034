"""What a network is on a dataset, as the new-run page shows it (its input, its parameters), and
the workbench's own rule on a run request's network: a custom network fits the memory of the
devices asked for (the workers' inventory knows them). Every rule of a config against its dataset
(the network takes the images, the recipe, the metric, the batch) is the trainer's pre-flight
(trainer/preflight.py), asked by validators.validate_trainer_config."""

from __future__ import annotations

import functools
import json
import math
from typing import Any

from trainer.config import RANGES, default_of
from trainer.preflight import CHECKED_NETWORKS, input_refusal, layers_key
from trainer.protocol import TASK_NETWORKS
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
    """A custom network fits the memory of the devices `request` asks for, when the executor
    knows it before the start (`memory_known`: Executor.knows_device_memory): the workbench's own
    rule, from the workers' inventory. Whether the network takes the dataset's images, and every
    other rule of a config against its dataset, is the trainer's pre-flight, which
    validators.validate_trainer_config asks (trainer/preflight.py). Only a ready dataset's sizes
    are known; a dataset still building is checked at launch."""
    if network != "custom" or request is None or not memory_known or not isinstance(config, dict):
        return
    if dataset.status != "ready" or not dataset.image_width:
        return
    # torch (with the trainer) is loaded only where a run is submitted, never by every web process
    from trainer.custom_net import CustomNetError  # torch: loaded only where this runs

    data = config.get("data")
    crop = data.get("crop_size") if isinstance(data, dict) else None
    crop = crop if isinstance(crop, int) and not isinstance(crop, bool) and crop > 0 else None
    layers = config.get("custom_layers") if isinstance(config.get("custom_layers"), list) else []
    shape = network_input(dataset, crop)
    key = layers_key(layers)
    if key is None or input_refusal(network, shape, key):
        return  # the pre-flight names what is wrong with the layers
    try:
        check_memory(layers=layers, shape=shape, config=config, request=request)
    except CustomNetError as error:
        raise RequestError("config.custom_layers", str(error)) from None


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
    key = layers_key(layers)
    if key is None:
        return  # the pre-flight refuses layers that long
    parameters, outputs = _custom_size(shape, key)
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
