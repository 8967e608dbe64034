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
import re
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


# An absolute path inside a message (the checkout's, the virtualenv's, the data dir's): the owner
# reads only its last name. Quotes, brackets, colons and commas end a path, as messages write them.
# A file:// URL's three slashes count as one.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~/])/+(?:[^\s/'\"()\[\]:,]+/)+([^\s/'\"()\[\]:,]*)")


# The folders this process works in (its run's, its dataset's, its weights'): hide_folders.
_WORKED_IN: set[str] = set()


def hide_folders(*folders: str | os.PathLike[str] | None) -> None:
    """Adds the server folders this process works in to those error_summary takes out whole (each
    rank calls it: a spawned process starts with none)."""
    _WORKED_IN.update(os.path.abspath(folder) for folder in folders if folder)


def _server_folders() -> list[str]:
    """The folders whose names a message must not show, longest first. A path is cut at the first
    space by _ABSOLUTE_PATH, so a data dir or checkout named with a space ("/srv/lab data/") would
    show its first part; these are taken out whole before it runs."""
    folders = {
        *_WORKED_IN,
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # the checkout
        sys.prefix,
        sys.base_prefix,
        os.path.expanduser("~"),
    }
    return sorted((folder.rstrip("/") for folder in folders if len(folder) > 1), key=len, reverse=True)


def error_summary(error: BaseException) -> str:
    """What a run's owner reads of an exception: its type and message, absolute paths cut to their
    last name. The one home of that rule for the log and the failed status alike."""
    text = str(error)
    for folder in _server_folders():
        text = text.replace(folder + "/", "").replace(folder, "(a folder)")  # a name under it stays
    text = _ABSOLUTE_PATH.sub(lambda match: match.group(1) or "(a folder)", text)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class EventLogHandler(logging.Handler):
    """Forwards `logging` records of the trainer as `log` events (so no print() patching).

    The events are the run's log as its owner reads it (run page, API, websocket, downloads), so a
    record with an exception carries only `error_summary` there: a traceback names the checkout's
    and the virtualenv's paths. The whole record, traceback and all, stays on the server side:
    every trainer process logs to its stderr too (`log_to_stderr`), which is the run folder's
    trainer.log (Slurm's --output), a file no page, API or socket serves.
    """

    def __init__(self, events: Events, level: int = logging.INFO) -> None:
        super().__init__(level)
        self.events = events

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                line = f"{line}: {error_summary(record.exc_info[1])}"
            self.events.log(line, level=record.levelname.lower())
        except Exception:  # a broken reporter must not kill training from inside logging
            self.handleError(record)


def log_to_stderr() -> None:
    """The server side's copy of the trainer's log, tracebacks included: the process's stderr, which
    the workbench writes to the run folder's trainer.log (the CLI's processes and each DDP rank)."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
