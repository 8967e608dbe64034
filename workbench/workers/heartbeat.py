"""The worker's heartbeat and its housekeeping, two threads of the worker's main process started
when the worker is ready.

- The heartbeat stores the host's devices and whether its consumer is consuming, every
  HEARTBEAT_SECONDS, and nothing else. Liveness never waits for work: when the beat also ran the
  scheduling pass and every search's pass, one slow pass on a loaded host (26.7 s) silenced it past
  WORKER_TIMEOUT_SECONDS, and the host's own healthy runs were reclaimed as if it had died.
- The housekeeping pass (signals.housekeeping: requeue the builds of lost workers, fail stale
  inference jobs, reclaim and schedule, advance the searches) runs in its own thread at the same
  pace. It never overlaps itself: one thread per process, and across the workers one lock in the
  cache, so a slow pass makes the next one wait instead of piling passes up on a busy host.

The web side reads the host rows to show which workers are alive and what they have; a host not
heard from within WORKER_TIMEOUT_SECONDS is offline, and its runs are reclaimed by a later pass of
any worker unless their watch still reports them (runs/scheduler/run_jobs.py).

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
from django.core.cache import cache
from django.db import close_old_connections
from django.utils import timezone

from workbench.workers import signals
from workbench.workers.boot import BOOT_ID
from workbench.workers.inventory import consumer_beat, host_heartbeat, host_queue_name, local_devices
from workbench.workers.models import WorkerHost

log = logging.getLogger(__name__)

_stop = threading.Event()

# The cache key of the one housekeeping pass in progress among all the workers; it expires on its
# own should its worker die mid-pass.
PASS_LOCK = "workbench:housekeeping-pass"


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
    """One beat: liveness only (the host's devices, whether it consumes, whether it is stopping)."""
    host_heartbeat(hostname=hostname, boot_id=BOOT_ID, devices=local_devices())
    if consumer is not None:
        if worker_is_stopping(consumer):
            _send(signals.worker_stopping, hostname)
        consumer_beat(hostname=hostname, consuming=consumer_is_consuming(consumer))


def housekeeping_once(hostname: str) -> bool:
    """One housekeeping pass, unless another worker's is in progress; True when this one ran."""
    lock_seconds = max(60.0, 10 * settings.HEARTBEAT_SECONDS)
    try:
        if not cache.add(PASS_LOCK, hostname, timeout=lock_seconds):
            return False
    except Exception:
        # No cache (the broker's Redis is down): passes may overlap across workers, which is
        # correct (every claim is a conditional update), only slower; not passing is worse.
        log.warning("housekeeping of %s: no lock in the cache; passing without it", hostname)
        _send(signals.housekeeping, hostname)
        return True
    try:
        _send(signals.housekeeping, hostname)
    finally:
        try:
            cache.delete(PASS_LOCK)
        except Exception:
            log.warning("housekeeping of %s: could not release the lock; it expires in %.0f s", hostname, lock_seconds)
    return True


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


def _keep_house_forever(hostname: str) -> None:
    while not _stop.wait(settings.HEARTBEAT_SECONDS):
        try:
            close_old_connections()
            housekeeping_once(hostname)
        except Exception:
            log.exception("housekeeping of %s failed", hostname)


@celeryd_after_setup.connect
def consume_host_queue(sender, instance, **kwargs) -> None:
    """Every worker also consumes its host's own queue, where runs placed on it are sent."""
    instance.app.amqp.queues.select_add(host_queue_name(sender))


@worker_ready.connect
def start_heartbeat(sender=None, **kwargs) -> None:
    hostname = sender.hostname
    # The sender is the worker's consumer: the beat reads its state (consuming, stopping).
    beat = threading.Thread(target=_beat_forever, args=(hostname, sender), name="heartbeat", daemon=True)
    beat.start()
    passes = threading.Thread(target=_keep_house_forever, args=(hostname,), name="housekeeping", daemon=True)
    passes.start()
    log.info("heartbeat and housekeeping started for %s every %.1fs", hostname, settings.HEARTBEAT_SECONDS)


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
