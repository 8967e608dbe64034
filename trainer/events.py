"""Events out of the trainer: typed JSON objects, one per line.

The web app can pass any object with an `emit(event: dict)` method (the `Reporter` protocol);
the CLI writes JSON lines to a file or stdout. Every event carries `type` and `time` (unix
seconds); the types and their fields are named in trainer/protocol.py, documented in
docs/formats.md. Only rank 0 reports.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import threading
import time
from typing import IO, Any, Protocol, runtime_checkable

from trainer.protocol import LOG, METRICS, PROGRESS, STATUS, VALIDATION


@runtime_checkable
class Reporter(Protocol):
    def emit(self, event: dict[str, Any]) -> None: ...


class NullReporter:
    def emit(self, event: dict[str, Any]) -> None:
        pass


class ListReporter:
    """Keeps events in memory (tests, notebooks)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]


def _clean(value: Any) -> Any:
    # JSON has no NaN/inf; a diverged loss is reported as null rather than producing invalid JSON.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class JsonLinesReporter:
    """One JSON object per line, flushed per event; each line is one write() so lines from the
    launcher and rank 0 appending to the same file never interleave."""

    def __init__(self, target: str | os.PathLike[str] | IO[str] | None = None) -> None:
        self._lock = threading.Lock()
        if target is None or target == "-":
            self._stream: IO[str] = sys.stdout
            self._owned = False
        elif isinstance(target, str | os.PathLike):
            self._stream = open(target, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
            self._owned = True
        else:
            self._stream = target
            self._owned = False

    def emit(self, event: dict[str, Any]) -> None:
        line = json.dumps({k: _clean(v) for k, v in event.items()}, separators=(",", ":")) + "\n"
        with self._lock:
            self._stream.write(line)
            self._stream.flush()

    def close(self) -> None:
        if self._owned:
            self._stream.close()


class Events:
    """Typed helpers over a Reporter: `events.metrics(step=..., ...)` etc."""

    def __init__(self, reporter: Reporter | None) -> None:
        self.reporter: Reporter = reporter or NullReporter()

    def emit(self, kind: str, **fields: Any) -> None:
        self.reporter.emit({"type": kind, "time": time.time(), **fields})

    def status(self, state: str, message: str = "", **fields: Any) -> None:
        self.emit(STATUS, state=state, message=message, **fields)

    def log(self, line: str, level: str = "info") -> None:
        self.emit(LOG, line=line, level=level)

    def metrics(self, **fields: Any) -> None:
        self.emit(METRICS, **fields)

    def validation(self, **fields: Any) -> None:
        self.emit(VALIDATION, **fields)

    def progress(self, percent: float, eta_seconds: float | None, elapsed: float, **fields: Any) -> None:
        self.emit(PROGRESS, percent=round(percent, 3), eta_seconds=eta_seconds, elapsed=round(elapsed, 3), **fields)


class EventLogHandler(logging.Handler):
    """Forwards `logging` records of the trainer as `log` events (so no print() patching)."""

    def __init__(self, events: Events, level: int = logging.INFO) -> None:
        super().__init__(level)
        self.events = events

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.events.log(self.format(record), level=record.levelname.lower())
        except Exception:  # a broken reporter must not kill training from inside logging
            self.handleError(record)
