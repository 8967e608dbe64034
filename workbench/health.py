"""Health checks behind /healthz: each returns {"ok": bool, "detail": str, "ms": float}.

No secrets: connection URLs, hostnames of the database or passwords never appear.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

from workbench.workers.inventory import consuming_hosts
from workbench.workers.models import WorkerHost

CHECK_TIMEOUT_SECONDS = 2.0


def _timed(check) -> dict:
    started = time.perf_counter()
    try:
        detail = check()
        ok = True
    except Exception as error:  # every failure is reported, none raised: this is the health page
        detail = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
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
        message = await asyncio.wait_for(layer.receive(channel), CHECK_TIMEOUT_SECONDS)
        if message.get("token") != token:
            raise RuntimeError("the channel layer returned a different message")

    async_to_sync(round_trip)()
    return type(layer).__name__


def workers() -> list[dict]:
    """Each worker host: online (its heartbeat is fresh) and consuming (it takes tasks)."""
    hosts = list(WorkerHost.objects.all())
    try:
        consuming = consuming_hosts([host.hostname for host in hosts])
    except Exception:  # the cache is on the broker's Redis; when it is down nothing is consumed
        consuming = set()
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


def health_report() -> dict:
    checks = {
        "database": _timed(_database),
        "broker": _timed(_broker),
        "channel_layer": _timed(_channel_layer),
        "live_channel_layer": _timed(lambda: _channel_layer(settings.LIVE_CHANNEL_LAYER)),
    }
    worker_list = workers() if checks["database"]["ok"] else []
    checks["workers"] = _workers_check(worker_list)
    return {
        "status": "ok" if all(check["ok"] for check in checks.values()) else "degraded",
        "checks": checks,
        "workers": worker_list,
    }
