"""What compute devices this host has: NVIDIA GPUs through NVML, otherwise the CPU as one device.

Runs inside the Celery worker (for its heartbeat) and must never fail the worker: a missing driver
or library simply means "no GPUs".
"""

from __future__ import annotations

import logging
import os
import platform

import psutil

log = logging.getLogger(__name__)

MIB = 1024 * 1024


def discover_devices() -> list[dict]:
    gpus = nvml_gpus()
    return gpus if gpus else [cpu_device()]


def nvml_gpus() -> list[dict]:
    try:
        import pynvml  # optional: without NVIDIA's library this host simply has no GPUs
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        # No driver on this host: the normal case on CPU-only machines.
        return []
    try:
        return [_nvml_gpu(pynvml, index) for index in range(pynvml.nvmlDeviceGetCount())]
    except pynvml.NVMLError as error:
        log.warning("NVML could not read the GPUs: %s", error)
        return []
    finally:
        pynvml.nvmlShutdown()


def _nvml_gpu(pynvml, index: int) -> dict:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
    utilization = pynvml.nvmlDeviceGetUtilizationRates(handle)
    name = pynvml.nvmlDeviceGetName(handle)
    try:
        temperature = pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
    except pynvml.NVMLError:
        temperature = None
    try:
        power_watts = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
    except pynvml.NVMLError:
        power_watts = None
    return {
        "kind": "gpu",
        "index": index,
        "name": name.decode() if isinstance(name, bytes) else name,
        "memory_total_mb": memory.total // MIB,
        "memory_used_mb": memory.used // MIB,
        "utilization_percent": utilization.gpu,
        "temperature_c": temperature,
        "power_watts": power_watts,
    }


def cpu_device() -> dict:
    memory = psutil.virtual_memory()
    return {
        "kind": "cpu",
        "index": 0,
        "name": _cpu_model_name(),
        "cores": os.cpu_count() or 1,
        "memory_total_mb": memory.total // MIB,
        "memory_used_mb": (memory.total - memory.available) // MIB,
        "utilization_percent": psutil.cpu_percent(interval=None),
    }


def _cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"
