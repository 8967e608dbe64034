"""One way to wait on something a real process does: poll until true, fail with what was awaited.

Deadlines are generous on purpose: the suite runs on busy 2-core machines, and a test waits for a
state, never for a duration, so a slow machine makes a test slower, not red.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    *,
    what: str | Callable[[], str],
    timeout: float = 120,
    interval: float = 0.2,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """The first truthy value `predicate()` returns; fails the test after `timeout` seconds.

    `what` says what was awaited; a callable is asked only on failure, so the message can show
    the state the test ended in. The predicate may itself fail the test early (a process that
    exited cannot reach the state any more). `sleep` waits between two asks: a browser's test
    passes one that lets Playwright serve its routes meanwhile (time.sleep would starve them).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what() if callable(what) else what}")
        sleep(interval)


def wait_for_state(row, *states: str, timeout: float = 180, field: str = "state"):
    """Refreshes a model row until `row.<field>` is one of `states`; returns the row."""

    def reached() -> bool:
        row.refresh_from_db()
        return getattr(row, field) in states

    def what() -> str:
        detail = getattr(row, "wait_reason", "") or getattr(row, "error", "") or ""
        return f"{type(row).__name__} {row.pk} to be {' or '.join(states)} (now {getattr(row, field)}: {detail})"

    wait_until(reached, what=what, timeout=timeout, interval=0.25)
    return row
