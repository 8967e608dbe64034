"""What devices a run asks for: the one home of the device request's shape.

Stored in `Run.device_request` as JSON, in the format the database has always held:
{"kind": "auto"} | {"kind": "cpu"} | {"kind": "count", "count": n} |
{"kind": "specific", "host": name, "indices": [...]}. Everything else reads and builds it
through DeviceRequest, never through string keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class DeviceRequest:
    kind: str = "auto"
    count: int = 1  # for "count"; the other kinds derive theirs (device_count)
    host: str = ""  # for "specific"
    indices: tuple[int, ...] = ()  # for "specific"

    AUTO: ClassVar[str] = "auto"
    CPU: ClassVar[str] = "cpu"
    COUNT: ClassVar[str] = "count"
    SPECIFIC: ClassVar[str] = "specific"
    KINDS: ClassVar[tuple[str, ...]] = (AUTO, CPU, COUNT, SPECIFIC)

    # ------------------------------------------------------------------ named constructors

    @classmethod
    def auto(cls) -> DeviceRequest:
        return cls(kind=cls.AUTO)

    @classmethod
    def cpu(cls) -> DeviceRequest:
        return cls(kind=cls.CPU)

    @classmethod
    def gpus(cls, count: int) -> DeviceRequest:
        return cls(kind=cls.COUNT, count=int(count))

    @classmethod
    def on_host(cls, host: str, indices) -> DeviceRequest:
        return cls(kind=cls.SPECIFIC, host=str(host), indices=tuple(int(i) for i in indices))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> DeviceRequest:
        """The stored JSON -> a request. An empty dict (rows made before a kind was stored, and
        tests) reads as "auto", which places like one GPU, as it always has."""
        data = data or {}
        kind = data.get("kind", cls.AUTO)
        if kind == cls.CPU:
            return cls.cpu()
        if kind == cls.SPECIFIC:
            return cls.on_host(data.get("host", ""), data.get("indices", ()))
        if kind == cls.COUNT:
            return cls.gpus(data.get("count", 1))
        return cls.auto()

    @classmethod
    def of(cls, value: DeviceRequest | Mapping[str, Any] | None) -> DeviceRequest:
        """Either form in: services take a DeviceRequest, or the stored dict (benchmarks, tests)."""
        return value if isinstance(value, DeviceRequest) else cls.from_dict(value)

    def to_dict(self) -> dict[str, Any]:
        if self.kind == self.COUNT:
            return {"kind": self.COUNT, "count": self.count}
        if self.kind == self.SPECIFIC:
            return {"kind": self.SPECIFIC, "host": self.host, "indices": list(self.indices)}
        return {"kind": self.kind}

    # ------------------------------------------------------------------ what the code asks of it

    @property
    def is_auto(self) -> bool:
        return self.kind == self.AUTO

    @property
    def is_cpu(self) -> bool:
        return self.kind == self.CPU

    @property
    def is_specific(self) -> bool:
        return self.kind == self.SPECIFIC

    @property
    def names_gpus(self) -> bool:
        """A number of GPUs or specific GPUs (what splitting a network over devices needs)."""
        return self.kind in (self.COUNT, self.SPECIFIC)

    @property
    def device_count(self) -> int:
        """Devices the request asks for (the CPU counts as one; "auto" as one device)."""
        if self.kind == self.COUNT:
            return self.count
        if self.kind == self.SPECIFIC:
            return len(self.indices)
        return 1

    def resolved(self, *, gpus_online: bool) -> DeviceRequest:
        """`auto` means one GPU when any online worker has GPUs, else the CPU."""
        if not self.is_auto:
            return self
        return self.gpus(1) if gpus_online else self.cpu()

    @property
    def spec(self) -> str:
        """As submitted (runs.validators.parse_device_request reads it back): auto, cpu, 2, host:0,1."""
        if self.kind == self.COUNT:
            return str(self.count)
        if self.is_specific:
            return f"{self.host}:{','.join(str(i) for i in self.indices)}"
        return self.kind

    @property
    def text(self) -> str:
        """In words, for pages and the API ("the CPU", "2 GPUs", "GPU 0, 1 on host")."""
        if self.is_cpu:
            return "the CPU"
        if self.is_specific:
            return f"GPU {', '.join(str(i) for i in self.indices)} on {self.host}"
        return f"{self.device_count} GPU{'s' if self.device_count != 1 else ''}"
