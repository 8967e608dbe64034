"""The trainer config of an attempt, and the one rule for the devices it names.

A GPU the worker only simulates (WORKBENCH_SIMULATED_GPUS: a test or demo host, Slurm's GRES
placeholders on a test cluster) has no CUDA behind it: each is one gloo process on the CPU.
Real GPUs are named 0..n-1, since CUDA_VISIBLE_DEVICES holds exactly the granted ones.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from workbench.runs.models import Run
from workbench.weights.references import reference_path
from workbench.workers.models import Device


@dataclass(frozen=True)
class DeviceConfig:
    devices: list  # the trainer config's "devices": GPU indexes, or "cpu" once per process
    env: dict[str, str]  # pins the child to its GPUs

    @property
    def on_cpu(self) -> bool:
        return all(device == "cpu" for device in self.devices)


def device_config(*, gpu_indexes: list[int], simulated: bool) -> DeviceConfig:
    """`gpu_indexes`: the host's numbers of the granted GPUs (empty for the CPU)."""
    if gpu_indexes and not simulated:
        devices: list = list(range(len(gpu_indexes)))
        visible = ",".join(str(index) for index in gpu_indexes)
    else:
        devices, visible = ["cpu"] * max(1, len(gpu_indexes)), ""
    # PCI order makes CUDA's numbering match NVML's, which the inventory and the sampler use.
    return DeviceConfig(devices, {"CUDA_VISIBLE_DEVICES": visible, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})


def granted_device_config(devices: list[Device]) -> DeviceConfig:
    """For devices a worker granted (Device rows): simulated when any of its GPUs is."""
    gpus = [device for device in devices if device.kind == Device.Kind.GPU]
    return device_config(gpu_indexes=[gpu.index for gpu in gpus], simulated=any(gpu.simulated for gpu in gpus))


def run_config(run: Run) -> dict:
    """The run's trainer config with what the workbench fills in, but the devices (each executor's)."""
    config = copy.deepcopy(run.config)
    config["run_dir"] = str(run.run_dir)
    config["network"] = run.network
    config.setdefault("data", {})["dataset"] = str(run.dataset_folder)
    if config.get("pretrained"):
        # The run stores the reference (weights:, upload:, run:); the file is resolved here, at
        # launch, by the one door of the grammar: the path exists only in the launch file.
        path = reference_path(config["pretrained"], owner=run.owner, network=run.network, run_dir=run.run_dir)
        config["pretrained"] = str(path)
    return config
