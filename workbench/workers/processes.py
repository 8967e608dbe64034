"""One way to start a child process of a worker (a trainer, an inference or export engine, a
benchmark): the right environment, no terminal, and death with its parent; and one way to follow
it: its events file read line by line, a stop with grace, a kill of its whole process group."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from django.conf import settings

from trainer import protocol

log = logging.getLogger(__name__)


def die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent dies (PR_SET_PDEATHSIG), so a killed
    worker never leaves orphans behind; a trainer then saves a checkpoint on its way out."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a child that is not a Django process: the engines import no
    Django, and the repository root is on the path so `python -m trainer` finds its package."""
    env = {**os.environ, **(extra or {}), "PYTHONUNBUFFERED": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(settings.BASE_DIR), os.environ.get("PYTHONPATH", "")]))
    return env


def start_child(
    argv: Sequence[str],
    *,
    stdout: IO | int,
    stderr: IO | int = subprocess.STDOUT,
    env: Mapping[str, str] | None = None,
    own_session: bool = False,
) -> subprocess.Popen:
    """Starts `argv` from the repository root with `child_environment(env)`.

    `own_session` puts the child in a process group of its own, so a stop signal sent to the
    group reaches all of its processes (every rank and data loader of a trainer).
    """
    return subprocess.Popen(
        list(argv),
        cwd=settings.BASE_DIR,
        env=child_environment(env),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=own_session,
        preexec_fn=die_with_parent,  # noqa: PLW1509  (only prctl, safe after fork)
    )


def kill_group(process: subprocess.Popen, signum: int) -> None:
    """`signum` to every process of a child started with `own_session` (each rank, each loader)."""
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


class GracefulStop:
    """Stop with grace, the one rule for every child a worker follows: SIGTERM once (a trainer
    stops at an agreed step and saves a checkpoint), then SIGKILL when it is still there after
    `grace_seconds`. Call `request()` whenever a stop is wanted and `poll()` on every look."""

    def __init__(self, process: subprocess.Popen, *, grace_seconds: float, name: str) -> None:
        self.process = process
        self.grace_seconds = grace_seconds
        self.name = name
        self.signalled_at: float | None = None

    @property
    def requested(self) -> bool:
        return self.signalled_at is not None

    def request(self) -> None:
        if self.signalled_at is None:
            self.signalled_at = time.monotonic()
            kill_group(self.process, signal.SIGTERM)

    def poll(self) -> None:
        if self.signalled_at is not None and time.monotonic() - self.signalled_at > self.grace_seconds:
            log.warning("%s ignored SIGTERM for %.0f s; killing it", self.name, time.monotonic() - self.signalled_at)
            kill_group(self.process, signal.SIGKILL)

    def now(self) -> None:
        """Stops the child before returning: SIGTERM, the grace, then SIGKILL (a watch that
        cannot go on must not leave behind a child that nobody follows)."""
        self.request()
        try:
            self.process.wait(timeout=max(0.0, self.grace_seconds - (time.monotonic() - self.signalled_at)))
        except subprocess.TimeoutExpired:
            kill_group(self.process, signal.SIGKILL)
            self.process.wait()


class EventTail:
    """Reads complete JSON lines appended to a child's events file since the last read."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset
        self.partial = b""

    @property
    def consumed(self) -> int:
        """Bytes of complete lines read so far: where the next reader of the file starts."""
        return self.offset - len(self.partial)

    def read(self) -> list[dict]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()
        return list(protocol.read_events(lines))
