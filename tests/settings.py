"""Settings for the test suite: the real settings, on a private data dir and a private Redis.

Child processes the tests start (Celery worker, daphne, the run command) inherit the environment
set here, so they share the same data dir, test database and Redis.

The suite runs in parallel (pytest-xdist): each of its processes is a suite of its own, with its
own data dir, Redis, test database, Celery worker, daphne and Chromium. The xdist workers are
started by a controller that read these settings first; what they inherit of its environment is
not theirs, and is made anew (WORKBENCH_TEST_SUITE says whose it is).
"""

import os
import tempfile
from pathlib import Path

_suite = os.environ.get("PYTEST_XDIST_WORKER", "main")
if os.environ.get("WORKBENCH_TEST_SUITE", _suite) != _suite:
    os.environ.pop("WORKBENCH_DATA_DIR", None)
    os.environ.pop("REDIS_URL", None)
os.environ["WORKBENCH_TEST_SUITE"] = _suite
if not os.environ.get("WORKBENCH_DATA_DIR"):
    os.environ["WORKBENCH_DATA_DIR"] = tempfile.mkdtemp(prefix=f"workbench-test-{_suite}-")
if not os.environ.get("REDIS_URL"):
    from tests.services import start_test_redis

    os.environ["REDIS_URL"] = start_test_redis(Path(os.environ["WORKBENCH_DATA_DIR"]))
os.environ.setdefault("WORKBENCH_HEARTBEAT_SECONDS", "0.5")
os.environ.setdefault("WORKBENCH_WORKER_TIMEOUT_SECONDS", "5")
os.environ.setdefault("WORKBENCH_SYSTEM_SAMPLE_SECONDS", "1")

from workbench.settings import *  # noqa: E402,F403

# Hashing passwords slowly protects real accounts; in tests it only costs time.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Service processes started by the tests (worker, daphne) work on the test database that
# pytest-django created, not on the development one.
if os.environ.get("WORKBENCH_USE_TEST_DATABASE"):
    _database = DATABASES["default"]  # noqa: F405
    _database["NAME"] = _database.get("TEST", {}).get("NAME") or f"test_{_database['NAME']}"
    if "PYTEST_XDIST_WORKER" in os.environ:
        # pytest-django names an xdist worker's test database with the worker's id.
        _database["NAME"] += f"_{os.environ['PYTEST_XDIST_WORKER']}"
