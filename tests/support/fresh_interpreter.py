"""Run a test module's `main()` in a fresh interpreter on a database of its own: the embedded
SQLite in `data_dir`, or the PostgreSQL database `database_url`. Not the suite's test database:
the session's Celery worker heartbeats into that one and would lend its devices to these runs."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO_ROOT

# None of the session's settings: nothing but the fresh interpreter writes into its database.
DROPPED = ("DJANGO_ALLOW_ASYNC_UNSAFE", "DATABASE_URL", "REDIS_URL", "WORKBENCH_USE_TEST_DATABASE")


def run_main_in_fresh_interpreter(module: str, data_dir, *, database_url: str | None, timeout: int) -> str:
    """`module.main()` after django.setup(); fails the test on a non-zero exit. Returns its stdout."""
    env = {"DJANGO_SETTINGS_MODULE": "workbench.settings", "WORKBENCH_DATA_DIR": str(data_dir)}
    if database_url:
        env["DATABASE_URL"] = database_url
    clean = {k: v for k, v in os.environ.items() if k not in DROPPED}
    script = f"import django; django.setup(); import {module} as t; t.main()"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, env={**clean, **env}, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout
