"""Stopping a run by signal: who reacts to SIGTERM/SIGINT, and how no child process dies of one.

The runs app aborts and pauses a run by sending SIGTERM to the trainer's whole process group:
the launcher, every rank and every DataLoader worker get it at once. Only the training processes
may react (they agree on a step, save a checkpoint and exit with EXIT_STOPPED); a worker that died
of it would fail the run. Ignoring the signal in a child's own start-up code comes too late: a
child is exposed from its fork until then (a rank for the seconds it imports torch; a loader
worker until PyTorch has called `worker_init_fn`, after installing a SIGTERM handler of its own
that re-raises the signal). So a process starts its children with the stop signals blocked: they
inherit the mask (through fork and exec), and a signal sent meanwhile stays pending until the
child has set its disposition (`StopFlag.install` in a rank, `ignore_stop_signals` in a worker).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})


@contextlib.contextmanager
def stop_signals_held() -> Iterator[None]:
    """Blocks the stop signals in this thread while it starts child processes (see above). One
    that arrives meanwhile is not lost: it is delivered here when the block ends."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def ignore_stop_signals() -> None:
    """For a child that must not stop on its own (a DataLoader worker: it ends with its parent).
    Ignoring first discards a signal already pending, then it is safe to unblock."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


class StopFlag:
    """Set by SIGTERM/SIGINT (or by a caller); the ranks agree on it at the same step."""

    def __init__(self) -> None:
        self.requested = False
        self.signal_name: str | None = None
        self._previous: dict[int, Any] = {}

    def request(self, name: str = "request") -> None:
        self.requested, self.signal_name = True, name

    def install(self) -> None:
        """Handle the stop signals from now on, including one held pending while this process
        was started (see `stop_signals_held`): it is delivered as soon as they are unblocked."""
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, lambda s, f: self.request(signal.Signals(s).name))
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
