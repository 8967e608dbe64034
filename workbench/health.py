"""Health checks behind /healthz: each returns {"ok": bool, "detail": str, "ms": float}.

No secrets: connection URLs, hostnames of the database or passwords never appear.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

from workbench.workers.inventory import consuming_hosts
from workbench.workers.models import WorkerHost

CHECK_TIMEOUT_SECONDS = 2.0
# The whole answer: every check runs within it (a load balancer's probe gives up after about 5 s).
HEALTH_DEADLINE_SECONDS = 3.0


# Where the services listen is the server's business, even for staff: "Timeout reading from
# 127.0.0.1:56623" reads "Timeout reading from the server".
_ADDRESS = re.compile(r"(?:\b(?:\d{1,3}\.){3}\d{1,3}|\blocalhost|\[[0-9a-fA-F:]+\])(?::\d+)?|/\S+\.sock\b")


def _timed(check) -> dict:
    started = time.perf_counter()
    try:
        detail = check()
        ok = True
    except Exception as error:  # every failure is reported, none raised: this is the health page
        text = _ADDRESS.sub("the server", str(error))
        detail = f"{type(error).__name__}: {text}" if text else type(error).__name__
        ok = False
    return {"ok": ok, "detail": detail, "ms": round(1000 * (time.perf_counter() - started), 1)}


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return connection.vendor


def _broker() -> str:
    if not settings.REDIS_URL:
        raise RuntimeError("REDIS_URL is not set; start the workbench with `make run`")
    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=CHECK_TIMEOUT_SECONDS, socket_connect_timeout=CHECK_TIMEOUT_SECONDS
    )
    try:
        client.ping()
        return "redis " + str(client.info("server").get("redis_version", "?"))
    finally:
        client.close()


def _channel_layer(alias: str = "default") -> str:
    layer = get_channel_layer(alias)
    if layer is None:
        raise RuntimeError("no channel layer configured")

    async def round_trip() -> None:
        channel = await layer.new_channel()
        token = uuid.uuid4().hex
        await layer.send(channel, {"type": "health.ping", "token": token})
        message = await layer.receive(channel)
        if message.get("token") != token:
            raise RuntimeError("the channel layer returned a different message")

    async def bounded() -> None:
        # The whole round trip under the timeout, not only the receive: with the broker frozen
        # (SIGSTOP) the send waited 67 s for the socket.
        try:
            await asyncio.wait_for(round_trip(), CHECK_TIMEOUT_SECONDS)
        except TimeoutError:
            raise TimeoutError(f"no answer within {CHECK_TIMEOUT_SECONDS:g} s") from None

    async_to_sync(bounded)()
    return type(layer).__name__


def _in_threads(checks: dict[str, Callable[[], Any]], deadline: float) -> dict[str, dict]:
    """Each check in a thread of its own, all waited for until one deadline: a check that has not
    answered by then is reported as such (its thread ends on its own timeout, in the background)."""
    results: dict[str, dict] = {}
    threads = []
    for name, check in checks.items():
        thread = threading.Thread(
            target=lambda name=name, check=check: results.__setitem__(name, _timed(check)),
            name=f"healthz-{name}",
            daemon=True,
        )
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    late = {"ok": False, "detail": "no answer within the health check's deadline", "ms": None}
    return {name: dict(results.get(name) or late) for name in checks}


def workers() -> list[dict]:
    """Each worker host: online (its heartbeat is fresh) and consuming (it takes tasks)."""
    hosts = list(WorkerHost.objects.all())
    try:
        consuming = consuming_hosts([host.hostname for host in hosts])
    except Exception:  # the cache is on the broker's Redis; when it is down nothing is consumed
        consuming = set()
    return _worker_rows(hosts, consuming)


def _worker_rows(hosts: list[WorkerHost], consuming: set[str]) -> list[dict]:
    return [
        {
            "hostname": host.hostname,
            "online": host.is_online,
            "consuming": host.is_online and host.hostname in consuming,
            "seconds_since_heartbeat": round(host.seconds_since_seen, 1),
            "devices": host.devices,
        }
        for host in hosts
    ]


def _workers_check(worker_list: list[dict]) -> dict:
    online = [worker for worker in worker_list if worker["online"]]
    consuming = [worker for worker in online if worker["consuming"]]
    if not online:
        detail = "no worker has sent a heartbeat recently"
    elif not consuming:
        # Alive but deaf: a worker that cannot reach the broker takes no task.
        detail = f"{len(online)} online, none consuming tasks from the broker"
    else:
        detail = f"{len(consuming)} online and consuming"
        if len(consuming) < len(online):
            detail += f"; {len(online) - len(consuming)} online but not consuming"
    return {"ok": bool(consuming) and len(consuming) == len(online), "detail": detail, "ms": 0.0}


def health_report(*, details: bool = True) -> dict:
    """The states of the parts, all within HEALTH_DEADLINE_SECONDS. With `details` (staff), what
    each check found: versions, the database engine, the workers' hosts and devices; without
    (anyone else: /healthz needs no login), only whether each part is ok."""
    deadline = time.monotonic() + HEALTH_DEADLINE_SECONDS
    database = _timed(_database)  # here: the rows below are read in this thread's connection
    hosts = list(WorkerHost.objects.all()) if database["ok"] else []
    # Everything that goes to Redis at once, in threads: one frozen broker costs one deadline,
    # not a timeout per check.
    found = _in_threads(
        {
            "broker": _broker,
            "channel_layer": _channel_layer,
            "live_channel_layer": lambda: _channel_layer(settings.LIVE_CHANNEL_LAYER),
            "consuming": lambda: consuming_hosts([host.hostname for host in hosts]),
        },
        deadline,
    )
    # The cache is on the broker's Redis; when it is down nothing is consumed.
    listed = found.pop("consuming")
    consuming = listed["detail"] if listed["ok"] else set()
    worker_list = _worker_rows(hosts, consuming)
    checks = {"database": database, **found, "workers": _workers_check(worker_list)}
    status = "ok" if all(check["ok"] for check in checks.values()) else "degraded"
    if not details:
        return {"status": status, "checks": {name: {"ok": check["ok"]} for name, check in checks.items()}}
    return {"status": status, "checks": checks, "workers": worker_list}
