import socket
import time

from celery import shared_task

import workbench.workers.heartbeat  # noqa: F401  (connects the worker's heartbeat signals)
from workbench.workers.inventory import local_devices


@shared_task
def probe_devices() -> dict:
    """Report what the worker that runs this task offers (what its heartbeat lists: its GPUs, real
    or simulated, and its CPU); proves the queue end to end."""
    return {"hostname": socket.gethostname(), "devices": local_devices(), "time": time.time()}
