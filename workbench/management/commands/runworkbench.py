"""`manage.py runworkbench`: the whole workbench on one machine, supervised.

Applies migrations, starts the embedded Redis-compatible server when REDIS_URL is unset, then
daphne (HTTP and websockets) and one Celery worker; restarts a crashed one; Ctrl-C stops all.
"""

from __future__ import annotations

import os
import signal
import socket
import time
import urllib.request

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from workbench.audit.context import declare_door
from workbench.embedded_redis import (
    embedded_redis_command,
    forget_running,
    record_running,
    running_pid,
    wait_until_ready,
)
from workbench.supervisor import Service, Supervisor, celery_worker_argv, child_environment, python_argv


def _wait_for_http(url: str, timeout: float = 60.0):
    def wait(process) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise CommandError(f"the web server exited during start-up ({process.returncode})")
            try:
                urllib.request.urlopen(url, timeout=2).close()
                return
            except urllib.error.HTTPError:
                return  # it answered: /healthz says 503 until the worker's first heartbeat
            except OSError:
                time.sleep(0.2)
        raise CommandError(f"the web server did not answer at {url} within {timeout:.0f} s")

    return wait


class Command(BaseCommand):
    help = "Start the workbench (web, worker and, without REDIS_URL, an embedded Redis); Ctrl-C stops it."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="address daphne listens on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8000, help="port daphne listens on (default 8000)")
        parser.add_argument(
            "--worker-concurrency", type=int, default=4, help="tasks one worker runs at once (default 4)"
        )
        parser.add_argument("--no-migrate", action="store_true", help="do not apply migrations first")

    def handle(self, *args, **options):
        declare_door("system")  # its changes outside a request are the workbench's, not a command's
        host, port = options["host"], options["port"]
        self._check_port_free(host, port)
        if not options["no_migrate"]:
            call_command("migrate", interactive=False, verbosity=0)
            self.stdout.write("[workbench] database is up to date")

        services = []
        redis_url = settings.REDIS_URL
        if settings.EMBEDDED_REDIS:
            self._check_not_running()
            command = embedded_redis_command(data_dir=settings.DATA_DIR)
            redis_url = command.url
            services.append(
                Service(
                    name="redis",
                    argv=command.argv,
                    env=child_environment({}),
                    wait_ready=lambda process: wait_until_ready(command.url, process=process),
                )
            )
        services += _app_services(host, port, child_environment({"REDIS_URL": redis_url}), options)
        supervisor = Supervisor(services, out=self.stdout)
        signal.signal(signal.SIGINT, supervisor.request_stop)
        signal.signal(signal.SIGTERM, supervisor.request_stop)
        try:
            supervisor.start()
        except Exception as error:
            supervisor.stop_all()
            raise CommandError(f"could not start the workbench: {error}") from error
        if settings.EMBEDDED_REDIS:
            record_running(data_dir=settings.DATA_DIR, url=redis_url, pid=os.getpid())
        self._greet(host, port)
        try:
            code = supervisor.run()
        finally:
            forget_running(data_dir=settings.DATA_DIR, pid=os.getpid())
        if code:
            raise CommandError("stopped after repeated crashes (see the lines above)")

    def _check_not_running(self) -> None:
        # Two run commands on one data dir would share its database with two brokers: the
        # commands of a second terminal would reach one of them only.
        pid = running_pid(settings.DATA_DIR)
        if pid is not None:
            raise CommandError(
                f"a workbench is already running on this data dir (pid {pid}); stop it first, "
                "or give this one another WORKBENCH_DATA_DIR"
            )

    def _check_port_free(self, host: str, port: int) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as error:
                raise CommandError(f"cannot listen on {host}:{port}: {error.strerror}; choose --port") from None

    def _greet(self, host: str, port: int) -> None:
        url = f"http://{host}:{port}/"
        self.stdout.write(f"[workbench] ready at {url}  (data in {settings.DATA_DIR}; Ctrl-C stops everything)")
        if not get_user_model().objects.exists():
            self.stdout.write(
                "[workbench] no accounts yet: open "
                f"{url}setup/ to create the administrator account, or run "
                "`.venv/bin/python manage.py createsuperuser`"
            )


def _app_services(host: str, port: int, env: dict[str, str], options: dict) -> list[Service]:
    """Web and worker, and the Slurm follower where Slurm is on."""
    web = Service(
        name="web",
        argv=python_argv("-m", "daphne", "--bind", host, "--port", str(port), "workbench.asgi:application"),
        env=env,
        wait_ready=_wait_for_http(f"http://{host}:{port}/healthz"),
    )
    nodename = f"workbench@{socket.gethostname()}"
    worker = Service(
        name="worker", argv=celery_worker_argv(nodename=nodename, concurrency=options["worker_concurrency"]), env=env
    )
    if not settings.SLURM_ENABLED:
        return [web, worker]
    # Its own process, restarted like web and worker: a crash in it never takes a worker down.
    follower = Service(
        name="slurm-follower", argv=python_argv(str(settings.BASE_DIR / "manage.py"), "follow_slurm"), env=env
    )
    return [web, worker, follower]
