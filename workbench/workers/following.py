"""Following a child to its end: the one loop for every child a worker follows (a run's trainer, a
benchmark's trainer, an inference job's engine).

Each follower says what to store and what to look at; the loop is the same for all: store what
the child wrote, return its exit code once it is gone (after a last store, so nothing it wrote
is lost), and every `look_every` seconds let the follower look whether the child must stop (an
abort, a cancel, the row taken away) and apply the grace rule (GracefulStop.poll). A loop that
ends any other way (the database gone, a bug in a follower) takes the child with it, so that no
child runs that nobody follows: a benchmark's ResNet-50 left running on the CPU took 11 GB for
an hour.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

from workbench.workers.processes import GracefulStop

POLL_SECONDS = 0.5


def follow_child(
    process: subprocess.Popen,
    *,
    stop: GracefulStop,
    store: Callable[[], object],
    look: Callable[[], object],
    look_every: float = 1.0,
) -> int:
    """Stores what `process` writes until it exits and returns its exit code; `look()` decides on
    stops (calling `stop.request()` or `stop.kill()`), at most every `look_every` seconds."""
    next_look = 0.0
    try:
        while True:
            code = process.poll()
            store()
            if code is not None:
                return code
            now = time.monotonic()
            if now >= next_look:
                next_look = now + look_every
                look()
                stop.poll()
            time.sleep(POLL_SECONDS)
    except BaseException:
        stop.now()
        raise
