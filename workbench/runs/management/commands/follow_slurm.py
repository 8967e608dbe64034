import os
import signal
import socket
import threading
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from workbench.runs.executors.slurm.follow import follow_until_stopped


class Command(BaseCommand):
    help = "Follow the Slurm runs (submit, follow, stop, end); `make run` starts it when WORKBENCH_SLURM=1."

    def handle(self, *args, **options):
        if not settings.SLURM_ENABLED:
            raise CommandError("Slurm is not enabled: set WORKBENCH_SLURM=1 and WORKBENCH_SLURM_PARTITION")
        stop = threading.Event()
        # SIGTERM (the supervisor, a test) and Ctrl-C end the passes between two looks.
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        holder = f"{socket.gethostname()}:{os.getpid()}:{time.time()}"
        self.stdout.write(f"following Slurm partition {settings.SLURM_PARTITION} as {holder}")
        follow_until_stopped(holder, stop)
