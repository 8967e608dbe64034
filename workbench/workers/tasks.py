import socket
import time

from celery import shared_task

import workbench.workers.heartbeat  # noqa: F401  (connects the worker's heartbeat signals)
from workbench.workers.devices import discover_devices


@shared_task
def probe_devices() -> dict:
    """Report what the worker that runs this task sees; proves the queue end to end."""
    return {"hostname": socket.gethostname(), "devices": discover_devices(), "time": time.time()}
