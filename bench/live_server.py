"""A real daphne serving the workbench for a benchmark, started the way tests/conftest.py does."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def start_daphne(
    env: dict[str, str], log_path: Path | None = None, application: str = "workbench.asgi:application"
) -> tuple[subprocess.Popen, str]:
    """daphne on a free port with `env` (settings, data dir, Redis); returns it and its origin once
    it answers HTTP. It dies with this process."""
    from workbench.embedded_redis import free_port
    from workbench.workers.processes import die_with_parent

    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    log = log_path.open("ab") if log_path else subprocess.DEVNULL
    process = subprocess.Popen(
        [sys.executable, "-m", "daphne", "--bind", "127.0.0.1", "--port", str(port), application],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log, preexec_fn=die_with_parent,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{origin}/healthz", timeout=1).close()
            return process, origin
        except urllib.error.HTTPError:
            return process, origin  # it answers (503 without workers is an answer)
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"daphne did not start (exit code {process.poll()}); see {log_path}") from None
            time.sleep(0.1)
