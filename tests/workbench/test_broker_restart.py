"""A broker killed with SIGKILL while a run trains, then started again on the same port (issue 11).

The whole workbench runs as a user starts it (`manage.py runworkbench`, its own data dir and
database), with the embedded Redis-compatible server under its supervisor. After the broker is
back the worker must consume again, the run must keep training and stay abortable, and /healthz
must be "ok" again. (An external Redis given by REDIS_URL goes through the same client and
reconnect; it ran here as a second case until the suite's time ran short. /healthz while a broker
is dead is tests/workbench/test_health.py's.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO_ROOT
from tests.support.waiting import wait_until
from workbench.embedded_redis import free_port
from workbench.workers.processes import die_with_parent

pytestmark = [pytest.mark.slow]

SETUP = """
import json
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from datasets.models import Dataset
from tests.support.trainer_data import make_dataset_folder
from workbench.runs.services import run_submit

user = get_user_model().objects.create_user("alice", "alice@example.com", "a long password 42")
dataset = Dataset.objects.create(owner=user, name="bars", status=Dataset.Status.READY, image_width=8, image_height=8)
make_dataset_folder(dataset.path, train=48)
config = {"epochs": 2000, "batch_size": 8, "metrics_interval": 1, "data": {"num_workers": 0},
          "solver": {"optimizer": "sgd", "base_lr": 0.05}, "val_interval": 5}
run = run_submit(owner=user, dataset=dataset, name="long", network="lenet", config=config, gpus="cpu")
print(json.dumps({"token": Token.objects.create(user=user).key, "run": run.pk}))
"""


class Workbench:
    """`manage.py runworkbench` in a data dir of its own, driven over HTTP like a client would."""

    def __init__(self, data_dir: Path, redis_url: str = "") -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {
            k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"}
        }
        self.env.update(
            DJANGO_SETTINGS_MODULE="workbench.settings",
            WORKBENCH_DATA_DIR=str(data_dir),
            WORKBENCH_HEARTBEAT_SECONDS="1",
            WORKBENCH_WORKER_TIMEOUT_SECONDS="10",
            PYTHONUNBUFFERED="1",
        )
        if redis_url:
            self.env["REDIS_URL"] = redis_url
        data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = data_dir / "runworkbench.log"
        self.token = ""
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "runworkbench", "--port", str(self.port)],
                cwd=REPO_ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,  # noqa: PLW1509
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self, characters: int = 4000) -> str:
        return self.log()[-characters:]

    def request(self, method: str, path: str) -> tuple[int, dict]:
        request = urllib.request.Request(f"{self.base}{path}", method=method)
        if self.token:
            request.add_header("Authorization", f"Token {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def health(self) -> dict | None:
        try:
            return self.request("GET", "/healthz")[1]
        except OSError:
            return None

    def wait_for(self, predicate, what: str, timeout: float = 120):
        def alive_and_ready():
            assert self.process.poll() is None, f"runworkbench exited:\n{self.tail()}"
            return predicate()

        return wait_until(alive_and_ready, what=lambda: f"{what}:\n{self.tail()}", timeout=timeout, interval=0.5)

    def setup_run(self) -> int:
        shell = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", SETUP],
            cwd=REPO_ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shell.returncode == 0, shell.stderr[-3000:]
        created = json.loads(shell.stdout.strip().splitlines()[-1])
        self.token = created["token"]
        return created["run"]

    def run(self, run_id: int) -> dict:
        status, body = self.request("GET", f"/api/runs/{run_id}/")
        assert status == 200, body
        return body

    def probe(self, timeout: float) -> None:
        """Sends a task through the broker; fails unless a worker has run it within `timeout`."""
        status, body = self.request("POST", "/api/tasks/probe/")
        assert status == 202, body
        self.wait_for(
            lambda: self.request("GET", f"/api/tasks/{body['task_id']}/")[1].get("state") == "SUCCESS",
            "the probe task to be consumed",
            timeout,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(2)  # Ctrl-C: the supervisor stops everything
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()


def embedded_server(workbench: Workbench) -> psutil.Process:
    children = psutil.Process(workbench.process.pid).children()
    return next(child for child in children if "valkey-server" in " ".join(child.cmdline()))


def test_it_consumes_again_and_keeps_the_run_abortable_after_the_broker_is_killed(tmp_path):
    workbench = Workbench(tmp_path / "workbench")
    try:
        workbench.wait_for(lambda: (workbench.health() or {}).get("status") == "ok", "a healthy workbench")
        run_id = workbench.setup_run()
        workbench.wait_for(lambda: workbench.run(run_id)["state"] == "running", "the run to start")
        workbench.wait_for(lambda: workbench.run(run_id)["last_seq"] > 20, "the run to store some events")

        server = embedded_server(workbench)
        server.kill()
        # The supervisor starts it again on the same port, with the same password.
        workbench.wait_for(lambda: "restarting redis in" in workbench.log(), "the supervisor to restart Redis")
        workbench.wait_for(
            lambda: (workbench.health() or {}).get("checks", {}).get("broker", {}).get("ok"), "Redis back"
        )

        # Within 30 s of the broker's return a task sent through it has been run...
        workbench.probe(timeout=30)
        # ...and /healthz, which says whether the worker consumes, is "ok" again.
        workbench.wait_for(lambda: (workbench.health() or {}).get("status") == "ok", "a healthy workbench again", 30)
        assert "Unrecoverable error" not in workbench.log()

        # The run kept training and storing its events through the outage...
        stored = workbench.run(run_id)["last_seq"]
        workbench.wait_for(lambda: workbench.run(run_id)["last_seq"] > stored + 10, "the run to store new events")
        assert workbench.run(run_id)["state"] == "running"
        # ...and it can still be aborted.
        status, body = workbench.request("POST", f"/api/runs/{run_id}/abort/")
        assert status in (200, 202), body
        workbench.wait_for(lambda: workbench.run(run_id)["state"] == "aborted", "the run to be aborted", 90)
    finally:
        workbench.stop()
