import os
import signal
import socket
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from workbench.runs.executors.slurm.follow import follow_until_stopped, request_stop


class Command(BaseCommand):
    help = "Follow the Slurm runs (submit, follow, stop, end); `make run` starts it when WORKBENCH_SLURM=1."

    def handle(self, *args, **options):
        if not settings.SLURM_ENABLED:
            raise CommandError("Slurm is not enabled: set WORKBENCH_SLURM=1 and WORKBENCH_SLURM_PARTITION")
        # SIGTERM (the supervisor, a test) and Ctrl-C end the passes between two looks.
        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        holder = f"{socket.gethostname()}:{os.getpid()}:{time.time()}"
        self.stdout.write(f"following Slurm partition {settings.SLURM_PARTITION} as {holder}")
        follow_until_stopped(holder)
