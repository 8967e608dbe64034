"""The worker's heartbeat: every few seconds it stores its devices, says whether its consumer is
consuming, requeues the dataset builds of lost workers, fails inference jobs that stopped
reporting, then runs a scheduling pass.

A thread in the worker's main process, started when the worker is ready. The web side reads the
rows to show which workers are alive and what they have; a host not heard from within
WORKER_TIMEOUT_SECONDS is offline, and its runs are reclaimed by the next pass of any worker.

Alive is not enough: a worker whose consumer lost the broker takes no task, so each beat also
records whether the consumer is connected and running (/healthz reads it), and a worker that is
stopping (an unrecoverable consumer error, a shutdown) has its trainers stop with a checkpoint,
so it exits, the supervisor starts it again, and the runs resume, instead of waiting for days.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from celery import bootsteps
from celery.signals import celeryd_after_setup, worker_ready, worker_shutdown
from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from workbench.workers import signals
from workbench.workers.boot import BOOT_ID
from workbench.workers.inventory import consumer_beat, host_heartbeat, host_queue_name, local_devices
from workbench.workers.models import WorkerHost

log = logging.getLogger(__name__)

_stop = threading.Event()


def consumer_is_consuming(consumer) -> bool:
    """Whether the worker's consumer is connected to the broker and running its loop."""
    connection = getattr(consumer, "connection", None)
    blueprint = getattr(consumer, "blueprint", None)
    if connection is None or blueprint is None or blueprint.state != bootsteps.RUN:
        return False
    try:
        return bool(connection.connected)
    except Exception:  # a connection torn down under us: not consuming
        return False


def worker_is_stopping(consumer) -> bool:
    """Whether the worker process is on its way out (Celery waits for running tasks first)."""
    controller = getattr(consumer, "controller", None)
    blueprint = getattr(controller, "blueprint", None)
    return blueprint is not None and blueprint.state != bootsteps.RUN


def beat_once(hostname: str, consumer=None) -> None:
    host_heartbeat(hostname=hostname, boot_id=BOOT_ID, devices=local_devices())
    if consumer is not None:
        if worker_is_stopping(consumer):
            _send(signals.worker_stopping, hostname)
        consumer_beat(hostname=hostname, consuming=consumer_is_consuming(consumer))
    _send(signals.heartbeat, hostname)


def _send(signal, hostname: str) -> None:
    for receiver, result in signal.send_robust(sender=None, hostname=hostname):
        if isinstance(result, Exception):
            log.error("heartbeat of %s: %s failed", hostname, receiver.__qualname__, exc_info=result)


def _beat_forever(hostname: str, consumer) -> None:
    WorkerHost.objects.update_or_create(hostname=hostname, defaults={"started_at": timezone.now()})
    while not _stop.is_set():
        try:
            close_old_connections()
            beat_once(hostname, consumer)
        except Exception:
            # A database or broker hiccup must not kill the heartbeat: the next beat tries again.
            log.exception("heartbeat of %s failed", hostname)
        _stop.wait(settings.HEARTBEAT_SECONDS)


@celeryd_after_setup.connect
def consume_host_queue(sender, instance, **kwargs) -> None:
    """Every worker also consumes its host's own queue, where runs placed on it are sent."""
    instance.app.amqp.queues.select_add(host_queue_name(sender))


@worker_ready.connect
def start_heartbeat(sender=None, **kwargs) -> None:
    hostname = sender.hostname
    # The sender is the worker's consumer: the beat reads its state (consuming, stopping).
    thread = threading.Thread(target=_beat_forever, args=(hostname, sender), name="heartbeat", daemon=True)
    thread.start()
    log.info("heartbeat started for %s every %.1fs", hostname, settings.HEARTBEAT_SECONDS)


@worker_shutdown.connect
def mark_offline(sender=None, **kwargs) -> None:
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
