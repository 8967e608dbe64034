"""The README's command-line examples, as a new user types them: `make run` (the run command, with
REDIS_URL unset) in one terminal, `manage.py import_dataset ... --wait` and `manage.py train ...
--wait` in another. Both must reach the running workbench's embedded broker; with no workbench
running, they say so at once."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from PIL import Image

from tests.conftest import PASSWORD, REPO_ROOT
from tests.workbench.test_runworkbench import wait_healthy
from workbench.embedded_redis import RUNNING_RECORD, free_port

pytestmark = [pytest.mark.slow]


def terminal_env(data_dir) -> dict[str, str]:
    """A second terminal's environment: the default settings, nothing but the data dir."""
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"}}
    env.update(
        DJANGO_SETTINGS_MODULE="workbench.settings",
        WORKBENCH_DATA_DIR=str(data_dir),
        WORKBENCH_HEARTBEAT_SECONDS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def manage(data_dir, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env={**terminal_env(data_dir), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def digits_zip(path):
    """Two classes of 8x8 grey images a LeNet tells apart: dark and bright, with noise."""
    rng = np.random.default_rng(0)
    with zipfile.ZipFile(path, "w") as archive:
        for label, base in (("dark", 40), ("bright", 210)):
            for i in range(12):
                pixels = np.clip(base + rng.integers(-30, 30, (8, 8)), 0, 255).astype(np.uint8)
                image = path.parent / f"{label}-{i}.png"
                Image.fromarray(pixels, mode="L").save(image)
                archive.write(image, f"digits/{label}/{i}.png")
    return path


def create_admin(data_dir) -> None:
    result = manage(
        data_dir,
        "createsuperuser",
        "--noinput",
        DJANGO_SUPERUSER_USERNAME="admin",
        DJANGO_SUPERUSER_EMAIL="admin@example.com",
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
    )
    assert result.returncode == 0, result.stderr


def test_it_runs_the_readme_commands_against_the_running_workbench(tmp_path):
    data_dir = tmp_path / "var"
    port = free_port()
    log_path = tmp_path / "run.log"
    with log_path.open("wb") as log:
        workbench = subprocess.Popen(
            [sys.executable, "manage.py", "runworkbench", "--port", str(port)],
            cwd=REPO_ROOT,
            env=terminal_env(data_dir),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_healthy(f"http://127.0.0.1:{port}/healthz", workbench)
        create_admin(data_dir)
        archive = digits_zip(tmp_path / "digits.zip")

        imported = manage(
            data_dir, "import_dataset", str(archive), "--name", "digits", "--image-size", "8x8",
            "--channels", "1", "--wait", "--timeout", "240",
        )  # fmt: skip
        assert imported.returncode == 0, imported.stdout + imported.stderr + log_path.read_text()[-3000:]
        dataset_id = imported.stdout.split()[0]
        assert f"dataset {dataset_id} ready: 24 images, 2 classes" in imported.stdout

        trained = manage(
            data_dir, "train", "--dataset", dataset_id, "--network", "lenet", "--epochs", "1",
            "--batch-size", "8", "--gpus", "cpu", "--wait",
        )  # fmt: skip
        assert trained.returncode == 0, trained.stdout + trained.stderr + log_path.read_text()[-3000:]
        assert trained.stdout.strip().splitlines()[-1].startswith(f"run {trained.stdout.split()[0]}: done — finished ")

        second = manage(data_dir, "runworkbench", "--port", str(free_port()), timeout=60)
        assert second.returncode == 1 and "a workbench is already running on this data dir" in second.stderr

        workbench.send_signal(signal.SIGINT)
        assert workbench.wait(timeout=60) == 0, log_path.read_text()[-3000:]
        # Stopped, it is no longer found: the next command says so instead of queueing.
        assert not (data_dir / RUNNING_RECORD).exists()
        after = manage(data_dir, "train", "--dataset", dataset_id, "--network", "lenet", "--epochs", "1",
                       "--batch-size", "8", "--gpus", "cpu", "--wait", timeout=60)  # fmt: skip
        assert after.returncode == 1 and "no workbench is running" in after.stderr
    finally:
        if workbench.poll() is None:
            workbench.kill()
            workbench.wait()


def test_it_says_at_once_that_no_workbench_runs_and_queues_nothing(tmp_path):
    data_dir = tmp_path / "var"
    data_dir.mkdir()  # a data dir made on purpose (only the run command makes one by itself)
    assert manage(data_dir, "migrate", "--verbosity", "0").returncode == 0
    create_admin(data_dir)
    archive = digits_zip(tmp_path / "digits.zip")
    # A record left by a run command killed with SIGKILL names a process that is gone.
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (data_dir / RUNNING_RECORD).parent.mkdir(parents=True, exist_ok=True)
    (data_dir / RUNNING_RECORD).write_text(json.dumps({"host": "127.0.0.1", "port": free_port(), "pid": gone.pid}))

    result = manage(data_dir, "import_dataset", str(archive), "--name", "digits", "--wait", timeout=60)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "no workbench is running on this data dir" in result.stderr
    assert "make run" in result.stderr
    with sqlite3.connect(data_dir / "db.sqlite3") as db:  # the embedded default's database
        assert db.execute("SELECT COUNT(*) FROM datasets_dataset").fetchone() == (0,)
