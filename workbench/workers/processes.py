"""One way to start a child process of a worker (a trainer, an inference or export engine, a
benchmark): the right environment, no terminal, and death with its parent; and one way to follow
it: its events file read line by line, a stop with grace, a kill of its whole process group."""

from __future__ import annotations

import ctypes
import logging
import os
import resource
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ResourceLimits:
    """Kernel limits for a child that parses user files: its address space (a MemoryError past it,
    not a swapping host) and its CPU seconds (SIGXCPU past it, which ends the child)."""

    memory_bytes: int
    cpu_seconds: int

    def apply(self) -> None:
        resource.setrlimit(resource.RLIMIT_AS, (self.memory_bytes, self.memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (self.cpu_seconds, self.cpu_seconds + 5))


def start_child(
    argv: Sequence[str],
    *,
    stdout: IO | int,
    stderr: IO | int = subprocess.STDOUT,
    env: Mapping[str, str] | None = None,
    own_session: bool = False,
    limits: ResourceLimits | None = None,
) -> subprocess.Popen:
    """Starts `argv` from the repository root with `child_environment(env)`.

    `own_session` puts the child in a process group of its own, so a stop signal sent to the
    group reaches all of its processes (every rank and data loader of a trainer). `limits` are
    set before the exec, so they hold from the child's first instruction.
    """

    def before_exec() -> None:
        die_with_parent()
        if limits is not None:
            limits.apply()

    return subprocess.Popen(
        list(argv),
        cwd=settings.BASE_DIR,
        env=child_environment(env),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=own_session,
        preexec_fn=before_exec,  # noqa: PLW1509  (only prctl and setrlimit, safe after fork)
    )


def kill_group(process: subprocess.Popen, signum: int) -> None:
    """`signum` to every process of a child started with `own_session` (each rank, each loader)."""
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


class StopClock:
    """When the stop was first asked for, in this process's memory (a watch that lives as long
    as its child). An executor that looks again on each pass keeps it elsewhere (a cache)."""

    def __init__(self) -> None:
        self.started_at: float | None = None

    def start(self) -> bool:
        """True the first time only: then the stop is sent."""
        if self.started_at is not None:
            return False
        self.started_at = time.monotonic()
        return True

    def elapsed(self) -> float | None:
        return None if self.started_at is None else time.monotonic() - self.started_at


class GracefulStop:
    """Stop with grace, the one rule for every child a worker follows and every job the Slurm
    follower stops: ask once (SIGTERM: a trainer stops at an agreed step and saves a checkpoint),
    then force it (SIGKILL, a cancel) when it is still there after `grace_seconds`. Call
    `request()` whenever a stop is wanted and `poll()` on every look."""

    def __init__(
        self,
        *,
        terminate: Callable[[], None],
        kill: Callable[[], None],
        grace_seconds: float,
        name: str,
        clock: StopClock | None = None,
        process: subprocess.Popen | None = None,
    ) -> None:
        self.terminate, self.kill = terminate, kill
        self.process = process  # for now(): a child this process started
        self.grace_seconds = grace_seconds
        self.name = name
        self.clock = clock or StopClock()

    @classmethod
    def of_process(cls, process: subprocess.Popen, *, grace_seconds: float, name: str) -> GracefulStop:
        return cls(
            terminate=lambda: kill_group(process, signal.SIGTERM),
            kill=lambda: kill_group(process, signal.SIGKILL),
            grace_seconds=grace_seconds,
            name=name,
            process=process,
        )

    @property
    def requested(self) -> bool:
        return self.clock.elapsed() is not None

    def request(self) -> None:
        if self.clock.start():
            self.terminate()

    def poll(self) -> None:
        elapsed = self.clock.elapsed()
        if elapsed is not None and elapsed > self.grace_seconds:
            log.warning("%s ignored SIGTERM for %.0f s; forcing it to stop", self.name, elapsed)
            self.kill()

    def now(self) -> None:
        """For a child process: stops it before returning (SIGTERM, the grace, then SIGKILL), so
        that a watch that cannot go on leaves behind no child that nobody follows."""
        assert self.process is not None, "now() stops a child process"
        self.request()
        try:
            self.process.wait(timeout=max(0.0, self.grace_seconds - (self.clock.elapsed() or 0.0)))
        except subprocess.TimeoutExpired:
            self.kill()
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
