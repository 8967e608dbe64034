"""The run command itself, as a new user starts it: embedded Redis, daphne, a worker (and the Slurm
follower where Slurm is on)."""

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import psutil
import pytest

from tests.conftest import REPO_ROOT
from tests.support.waiting import wait_until
from workbench.embedded_redis import free_port

pytestmark = [pytest.mark.slow]


def fetch_health(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        return json.loads(error.read())
    except OSError:
        return None


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 120) -> dict:
    last = [None]  # the last report, for the failure message

    def healthy() -> dict | None:
        assert process.poll() is None, "runworkbench exited early"
        last[0] = report = fetch_health(url)
        return report if report and report["status"] == "ok" else None

    return wait_until(healthy, what=lambda: f"{url} to be healthy: {last[0]}", timeout=timeout, interval=0.5)


def wait_for_lines(log_path, lines: list[str], timeout: float = 60) -> None:
    wait_until(
        lambda: all(line in log_path.read_text() for line in lines),
        what=lambda: f"the lines {lines} in the log:\n{log_path.read_text()[-3000:]}",
        timeout=timeout,
    )


def test_it_starts_everything_restarts_a_crash_and_stops_cleanly(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"}}
    env.update(
        DJANGO_SETTINGS_MODULE="workbench.settings",
        WORKBENCH_DATA_DIR=str(tmp_path),
        WORKBENCH_HEARTBEAT_SECONDS="1",
        PYTHONUNBUFFERED="1",
        # Slurm on, with no cluster to reach: the follower starts, says the controller does not
        # answer, and keeps following (tests/workbench/runs/test_slurm.py follows a real one).
        WORKBENCH_SLURM="1",
        WORKBENCH_SLURM_PARTITION="wb",
        SLURM_CONF=str(tmp_path / "no-cluster.conf"),
    )
    log_path = tmp_path / "run.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "runworkbench", "--port", str(port)],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        health_url = f"http://127.0.0.1:{port}/healthz"
        report = wait_healthy(health_url, process)
        # An anonymous client reads the states only (the details are for staff: test_health).
        assert report["checks"]["database"] == {"ok": True} and "workers" not in report
        assert report["checks"]["broker"]["ok"] and report["checks"]["channel_layer"]["ok"]
        assert report["checks"]["workers"]["ok"]  # the run command's worker sends heartbeats
        output = log_path.read_text()
        assert "no accounts yet: open" in output and "/setup/" in output

        tree = psutil.Process(process.pid).children(recursive=True)
        names = " ".join(" ".join(p.cmdline()) for p in tree)
        assert "valkey-server" in names and "daphne" in names and "celery" in names
        assert "follow_slurm" in names
        wait_for_lines(log_path, ["[slurm-follower] following Slurm partition wb"])

        # The worker and the follower crash at once; each is restarted on its own.
        services = psutil.Process(process.pid).children()
        # Both found before either is killed: a killed child is a zombie until its supervisor
        # reaps it, and reading a zombie's command line raises.
        crashing = [next(p for p in services if name in " ".join(p.cmdline())) for name in ("celery", "follow_slurm")]
        for child in crashing:
            child.kill()
        restarted = ("worker", "slurm-follower")
        wait_for_lines(log_path, [f"restarting {name} in 1 s" for name in restarted])
        assert "worker stopped unexpectedly (killed by SIGKILL)" in log_path.read_text()
        assert "slurm-follower stopped unexpectedly (killed by SIGKILL)" in log_path.read_text()
        # Healthy alone proves nothing yet (the old worker's last heartbeat is still fresh): first
        # both services started again, then healthy.
        wait_until(
            lambda: all(log_path.read_text().count(f"[workbench] {name} started (pid") == 2 for name in restarted),
            what=lambda: f"the worker and the follower to start again:\n{log_path.read_text()[-3000:]}",
            timeout=60,
        )
        wait_healthy(health_url, process)

        tree = psutil.Process(process.pid).children(recursive=True)
        assert "follow_slurm" in " ".join(" ".join(p.cmdline()) for p in tree)  # back
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0, log_path.read_text()[-3000:]
        gone, alive = psutil.wait_procs(tree, timeout=10)
        assert not alive, f"left behind: {[p.pid for p in alive]}"
        assert "all services stopped" in log_path.read_text()
    finally:
        if process.poll() is None:
            process.kill()
