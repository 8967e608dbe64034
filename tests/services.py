"""Real services for the test suite: an embedded Redis-compatible server, started once per run."""

from __future__ import annotations

import atexit
import subprocess
from pathlib import Path

from workbench.embedded_redis import embedded_redis_command, wait_until_ready
from workbench.workers.processes import die_with_parent


def start_test_redis(data_dir: Path) -> str:
    command = embedded_redis_command(data_dir=data_dir, persist=False)
    process = subprocess.Popen(command.argv, preexec_fn=die_with_parent)  # noqa: PLW1509
    atexit.register(_stop, process)
    wait_until_ready(command.url, process=process)
    return command.url


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
