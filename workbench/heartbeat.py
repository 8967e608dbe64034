"""The worker's heartbeat: every few seconds it stores its devices and the time in the database.

A thread in the worker's main process, started when the worker is ready. The web side reads the
rows to show which workers are alive and what they have; a row not refreshed within
WORKER_TIMEOUT_SECONDS means the worker is gone.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from workbench.devices import discover_devices

log = logging.getLogger(__name__)

_stop = threading.Event()


def beat_once(hostname: str) -> None:
    from workbench.runs.models import WorkerHost

    WorkerHost.objects.update_or_create(
        hostname=hostname, defaults={"devices": discover_devices(), "last_seen": timezone.now()}
    )


def _beat_forever(hostname: str) -> None:
    from workbench.runs.models import WorkerHost

    WorkerHost.objects.update_or_create(hostname=hostname, defaults={"started_at": timezone.now()})
    while not _stop.is_set():
        try:
            close_old_connections()
            beat_once(hostname)
        except Exception:
            # A database hiccup must not kill the heartbeat: the next beat tries again.
            log.exception("heartbeat of %s failed", hostname)
        _stop.wait(settings.HEARTBEAT_SECONDS)


@worker_ready.connect
def start_heartbeat(sender=None, **kwargs) -> None:
    hostname = sender.hostname
    thread = threading.Thread(target=_beat_forever, args=(hostname,), name="heartbeat", daemon=True)
    thread.start()
    log.info("heartbeat started for %s every %.1fs", hostname, settings.HEARTBEAT_SECONDS)


@worker_shutdown.connect
def mark_offline(sender=None, **kwargs) -> None:
    from workbench.runs.models import WorkerHost

    _stop.set()
    if sender is None:
        return
    # A clean stop shows the worker offline at once instead of after the timeout.
    expired = timezone.now() - timedelta(seconds=settings.WORKER_TIMEOUT_SECONDS + 1)
    try:
        close_old_connections()
        WorkerHost.objects.filter(hostname=sender.hostname).update(last_seen=expired)
    except Exception:
        log.exception("could not mark %s offline", sender.hostname)
