"""Starts the workbench's processes, watches them, restarts a crashed one, and stops them all.

Each service runs in its own session (so a Ctrl-C in the terminal reaches only the supervisor,
which then stops the services in order) and dies with the supervisor if the supervisor is
killed (PR_SET_PDEATHSIG). Stopping signals every process in every service's tree, including
trainer processes that a worker started in sessions of their own, and kills what is left after
a grace period.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from workbench.workers.processes import die_with_parent

TAIL_LINES = 20


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


@dataclass
class Service:
    name: str
    argv: list[str]
    env: dict[str, str]
    # Called after the process starts; raises if the service does not become ready.
    wait_ready: Callable[[subprocess.Popen], None] | None = None
    process: subprocess.Popen | None = None
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=TAIL_LINES))
    crash_times: list[float] = field(default_factory=list)


class Supervisor:
    def __init__(
        self,
        services: list[Service],
        *,
        max_crashes: int = 5,
        crash_window_seconds: float = 120.0,
        grace_seconds: float = 15.0,
        out=None,
    ) -> None:
        self.services = services
        self.max_crashes = max_crashes
        self.crash_window_seconds = crash_window_seconds
        self.grace_seconds = grace_seconds
        self.out = out or sys.stdout
        self.stopping = threading.Event()
        self._print_lock = threading.Lock()

    def say(self, message: str) -> None:
        with self._print_lock:
            self.out.write(f"[workbench] {message}\n")
            self.out.flush()

    def _pump(self, service: Service, stream) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip()
            service.tail.append(line)
            with self._print_lock:
                self.out.write(f"[{service.name}] {line}\n")
                self.out.flush()
        stream.close()

    def spawn(self, service: Service) -> None:
        service.tail.clear()
        service.process = subprocess.Popen(
            service.argv,
            env=service.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,  # noqa: PLW1509  (only prctl, safe after fork)
        )
        threading.Thread(target=self._pump, args=(service, service.process.stdout), daemon=True).start()
        if service.wait_ready is not None:
            service.wait_ready(service.process)
        self.say(f"{service.name} started (pid {service.process.pid})")

    def start(self) -> None:
        for service in self.services:
            self.spawn(service)

    def run(self) -> int:
        """Watches until stop() is requested (returns 0) or a service crashes too often (returns 1)."""
        while not self.stopping.wait(0.5):
            for service in self.services:
                code = service.process.poll()
                if code is None or self.stopping.is_set():
                    continue
                if not self._restart_after_crash(service, code):
                    self.stop_all()
                    return 1
        self.stop_all()
        return 0

    def _restart_after_crash(self, service: Service, code: int) -> bool:
        now = time.monotonic()
        service.crash_times = [t for t in service.crash_times if now - t < self.crash_window_seconds] + [now]
        self.say(f"{service.name} stopped unexpectedly ({describe_exit(code)}). Its last lines:")
        for line in list(service.tail)[-10:]:
            self.say(f"    {line}")
        if len(service.crash_times) >= self.max_crashes:
            self.say(
                f"{service.name} crashed {len(service.crash_times)} times within "
                f"{self.crash_window_seconds:.0f} s; giving up and stopping everything."
            )
            return False
        # Back off a little more after each crash so a crash loop does not spin the CPU.
        delay = min(2.0 ** (len(service.crash_times) - 1), 10.0)
        self.say(f"restarting {service.name} in {delay:.0f} s (crash {len(service.crash_times)} of {self.max_crashes})")
        if self.stopping.wait(delay):
            return True
        try:
            self.spawn(service)
        except Exception as error:
            self.say(f"{service.name} could not be restarted: {error}")
            return False
        return True

    def request_stop(self, *_args) -> None:
        self.stopping.set()

    def stop_all(self) -> None:
        """SIGTERM to every process of every service (web and workers first, Redis last), then SIGKILL."""
        self.stopping.set()
        self.say("stopping all services")
        # The worker must still reach the broker while it finishes, so Redis stops last.
        self._terminate([s for s in self.services if s.name != "redis"])
        self._terminate([s for s in self.services if s.name == "redis"])
        for service in self.services:
            if service.process is not None:
                service.process.wait()
        self.say("all services stopped")

    def _terminate(self, services: list[Service]) -> None:
        targets: dict[int, psutil.Process] = {}
        signalled: set[int] = set()
        deadline = time.monotonic() + self.grace_seconds
        while True:
            # Look for the trees again each round: a worker task may start a trainer while stopping.
            for service in services:
                targets.update(_process_tree(service.process))
            for pid, process in targets.items():
                if pid not in signalled:
                    signalled.add(pid)
                    _signal(process, signal.SIGTERM)
            alive = [process for process in targets.values() if _alive(process)]
            if not alive:
                return
            if time.monotonic() > deadline:
                for process in alive:
                    self.say(f"pid {process.pid} did not stop within {self.grace_seconds:.0f} s; killing it")
                    _signal(process, signal.SIGKILL)
                psutil.wait_procs(alive, timeout=5)
                return
            time.sleep(0.2)


def _process_tree(popen: subprocess.Popen | None) -> dict[int, psutil.Process]:
    if popen is None or popen.poll() is not None:
        return {}
    try:
        root = psutil.Process(popen.pid)
        return {process.pid: process for process in [root, *root.children(recursive=True)]}
    except psutil.NoSuchProcess:
        return {}


def _signal(process: psutil.Process, signum: int) -> None:
    try:
        process.send_signal(signum)
    except psutil.NoSuchProcess:
        pass


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def python_argv(*args: str) -> list[str]:
    return [sys.executable, *args]


def celery_worker_argv(*, nodename: str, concurrency: int, extra: tuple[str, ...] = ()) -> list[str]:
    """The command of one workbench worker.

    Threads, not prefork: tasks mostly wait on the trainer and build processes they start, and
    forking a process that holds CUDA or torch state is unsafe. No gossip and no mingle: workers
    know of each other through their heartbeats in the database, and both steps cost broker
    traffic (every worker hears every worker) and time at each reconnect to the broker.
    """
    return python_argv(
        "-m", "celery", "--app", "workbench.celery", "worker",
        "--pool", "threads", "--concurrency", str(concurrency),
        "--without-gossip", "--without-mingle",
        "--hostname", nodename, "--loglevel", "INFO", *extra,
    )  # fmt: skip


def child_environment(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    env["PYTHONUNBUFFERED"] = "1"
    return env
