"""The device inventory: what each worker host reports on its heartbeat, stored per device."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from workbench.workers.devices import cpu_device, nvml_gpus
from workbench.workers.models import Device, WorkerHost

log = logging.getLogger(__name__)


def host_queue_name(hostname: str) -> str:
    return f"host.{hostname}"


def _consumer_key(hostname: str) -> str:
    return f"workbench:consuming:{hostname}"


def consumer_beat(*, hostname: str, consuming: bool) -> None:
    """Records, for WORKER_TIMEOUT_SECONDS, that this host's worker consumes from the broker.

    Kept in the cache (Redis, beside the broker) rather than on the host row: it is a fact about
    the broker connection, true only while it is renewed. A worker that stops consuming stops
    renewing it (or deletes it), and the fact expires on its own if the worker hangs.
    """
    try:
        if consuming:
            cache.set(_consumer_key(hostname), True, timeout=settings.WORKER_TIMEOUT_SECONDS)
        else:
            cache.delete(_consumer_key(hostname))
    except Exception:
        # The cache lives on the broker's Redis: when it is down, the broker check says so.
        log.warning("could not record whether %s consumes", hostname, exc_info=True)


def consuming_hosts(hostnames: list[str]) -> set[str]:
    """Which of these hosts' workers consumed from the broker recently (see consumer_beat)."""
    found = cache.get_many([_consumer_key(hostname) for hostname in hostnames])
    return {hostname for hostname in hostnames if found.get(_consumer_key(hostname))}


def online_hosts():
    """Hosts heard from within WORKER_TIMEOUT_SECONDS: the ones work may be placed on."""
    cutoff = timezone.now() - timedelta(seconds=settings.WORKER_TIMEOUT_SECONDS)
    return WorkerHost.objects.filter(last_seen__gte=cutoff)


def gpus_online() -> bool:
    """Whether any online host offers a GPU (what a run asking for "auto" gets)."""
    return Device.objects.filter(kind=Device.Kind.GPU, host__in=online_hosts()).exists()


def lost_worker(host: WorkerHost | None, boot_id: uuid.UUID | None, *, watched_at: datetime | None = None) -> str:
    """Why work that a worker process took (under `boot_id`) is lost, or "" while that process
    lives: its host row is gone, it stopped sending heartbeats, or it restarted (another boot).

    `watched_at` is when the work's own watch (the thread that follows its trainer) last said it
    still follows it. A worker that is alive and still runs the trainer keeps its work even when
    its heartbeat is late: a host whose cores are all busy (a GPU host's loaders) can starve the
    beat for a while, and taking a healthy run from it loses the run's progress and starts a
    second trainer beside the first.
    """
    if host is None:
        return "its worker is gone"
    if not host.is_online and not _recent(watched_at):
        return f"worker {host.hostname} stopped sending heartbeats"
    if boot_id and host.boot_id != boot_id:
        return f"worker {host.hostname} restarted"
    return ""


def _recent(moment: datetime | None) -> bool:
    return moment is not None and moment >= timezone.now() - timedelta(seconds=settings.WORKER_TIMEOUT_SECONDS)


def simulated_gpus(count: int) -> list[dict]:
    return [
        {
            "kind": "gpu",
            "index": index,
            "name": f"Simulated GPU {index}",
            # What a benchmark's trainer enforces as the GPU's capacity (trainer/footprint.py).
            "memory_total_mb": settings.SIMULATED_GPU_MEMORY_MB,
            "memory_used_mb": 0,
            "utilization_percent": 0.0,
            "temperature_c": None,
            "power_watts": None,
            "simulated": True,
        }
        for index in range(count)
    ]


def local_devices() -> list[dict]:
    """This host's GPUs (real or simulated) and always its CPU, which CPU runs are given."""
    gpus = simulated_gpus(settings.SIMULATED_GPUS) if settings.SIMULATED_GPUS else nvml_gpus()
    return [*gpus, cpu_device()]


_DEVICE_FIELDS = ("name", "memory_total_mb", "memory_used_mb", "utilization_percent", "temperature_c", "power_watts")


def host_heartbeat(*, hostname: str, boot_id: uuid.UUID, devices: list[dict]) -> WorkerHost:
    """Stores one heartbeat: the host's time and its devices (allocations are left untouched)."""
    simulated = any(device.get("simulated") for device in devices)
    with transaction.atomic():
        host, _ = WorkerHost.objects.update_or_create(
            hostname=hostname,
            defaults={
                "queue": host_queue_name(hostname),
                "devices": devices,
                "boot_id": boot_id,
                "simulated": simulated,
                "last_seen": timezone.now(),
            },
        )
        seen = set()
        for device in devices:
            key = (device["kind"], int(device["index"]))
            seen.add(key)
            values = {field: device.get(field) for field in _DEVICE_FIELDS}
            values["memory_total_mb"] = values["memory_total_mb"] or 0
            values["memory_used_mb"] = values["memory_used_mb"] or 0
            values["simulated"] = bool(device.get("simulated"))
            Device.objects.update_or_create(host=host, kind=key[0], index=key[1], defaults=values)
        # A GPU that disappeared (driver reset, simulated count lowered) is no longer offered;
        # one still held by a run stays until the run ends.
        for device in Device.objects.filter(host=host, run__isnull=True, reserved_by=""):
            if (device.kind, device.index) not in seen:
                device.delete()
    return host


def hosts_for_display(user) -> list[dict]:
    """Hosts and their devices with who holds each one; the holder's run is named to its owner and staff."""
    hosts = []
    for host in WorkerHost.objects.prefetch_related("device_rows__run__owner"):
        devices = []
        for device in host.device_rows.all():
            holder = device.run
            visible = holder is not None and holder.is_visible_to(user)
            devices.append(
                {
                    "kind": device.kind,
                    "index": device.index,
                    "label": device.label,
                    "name": device.name,
                    "simulated": device.simulated,
                    "memory_total_mb": device.memory_total_mb,
                    "memory_used_mb": device.memory_used_mb,
                    "utilization_percent": device.utilization_percent,
                    "temperature_c": device.temperature_c,
                    "power_watts": device.power_watts,
                    "in_use": holder is not None,
                    "run": {"id": holder.pk, "name": holder.name, "owner": holder.owner.username} if visible else None,
                }
            )
        hosts.append(
            {
                "hostname": host.hostname,
                "online": host.is_online,
                "simulated": host.simulated,
                "seconds_since_heartbeat": round(host.seconds_since_seen, 1),
                "devices": devices,
            }
        )
    return hosts
