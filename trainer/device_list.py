"""A run's device list as people write it: `["cpu"]`, `"cpu x 2"`, `[0, 1]`, `"0,1"`, `"cuda:0"`.

Standard library only: the workbench's validators read device lists in web processes.
"""

from __future__ import annotations

import re
from typing import Any

from trainer.messages import ConfigError, shown

MAX_DEVICES = 64  # per node: the most a host reports


def parse_devices(value: Any) -> list[str | int]:
    """`["cpu"]`, `["cpu", "cpu"]`, `"cpu x 2"`, `[0, 1]`, `"0,1"`, `"cuda:0"` -> a device list."""
    if isinstance(value, str):
        text = value.strip().lower()
        match = re.fullmatch(r"(cpu|cuda)\s*[x*]\s*(\d+)", text)
        if match:
            count = int(match.group(2))
            if not 1 <= count <= MAX_DEVICES:
                raise ConfigError(f"{shown(count)} devices: give 1 to {MAX_DEVICES} per node", field="devices")
            return ["cpu"] * count if match.group(1) == "cpu" else list(range(count))
        value = [part.strip() for part in text.split(",") if part.strip()]
    if not isinstance(value, list) or not value:
        raise ConfigError('expected a non-empty list such as ["cpu"], [0, 1] or "cpu x 2"', field="devices")
    if len(value) > MAX_DEVICES:
        raise ConfigError(f"{len(value)} devices: give 1 to {MAX_DEVICES} per node", field="devices")
    devices: list[str | int] = []
    for item in value:
        if isinstance(item, bool):
            raise ConfigError(f"{item!r} is not a device", field="devices")
        if isinstance(item, int) or (isinstance(item, str) and item.isdigit()):
            if not 0 <= int(item) < 1024:  # a CUDA index, never a 400-digit number in a message
                raise ConfigError(f"{shown(item)} is not a CUDA index", field="devices")
            devices.append(int(item))
        elif isinstance(item, str) and item.startswith("cuda:") and item[5:].isdigit():
            devices.append(int(item[5:]))
        elif item == "cpu":
            devices.append("cpu")
        else:
            raise ConfigError(f"{item!r} is not 'cpu' or a CUDA index", field="devices")
    kinds = {"cpu" if d == "cpu" else "cuda" for d in devices}
    if len(kinds) > 1:
        raise ConfigError("mixes CPU and CUDA devices; use one kind per run", field="devices")
    cuda = [d for d in devices if d != "cpu"]
    if len(set(cuda)) != len(cuda):
        raise ConfigError(f"a CUDA device appears twice in {devices}", field="devices")
    return devices
