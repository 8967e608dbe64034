"""The supervisor with real child processes."""

import io
import sys
import textwrap
import threading

import psutil

from tests.support.waiting import wait_until
from workbench.supervisor import Service, Supervisor, child_environment

SPAWNS_DETACHED_GRANDCHILD = textwrap.dedent(
    """
    import subprocess, sys, time
    # Like a worker starting a trainer: the grandchild lives in a session of its own.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    print("grandchild", child.pid, flush=True)
    time.sleep(600)
    """
)


def test_it_stops_every_process_including_detached_grandchildren():
    out = io.StringIO()
    service = Service(name="worker", argv=[sys.executable, "-c", SPAWNS_DETACHED_GRANDCHILD], env=child_environment({}))
    supervisor = Supervisor([service], out=out, grace_seconds=5)
    supervisor.start()
    wait_until(lambda: "grandchild" in out.getvalue(), what="the child to print its grandchild's pid", timeout=10)
    grandchild_pid = int(out.getvalue().split("grandchild ")[1].split()[0])
    grandchild = psutil.Process(grandchild_pid)
    assert grandchild.is_running()

    supervisor.stop_all()

    assert service.process.poll() is not None
    assert not grandchild.is_running() or grandchild.status() == psutil.STATUS_ZOMBIE
    assert "all services stopped" in out.getvalue()


def test_it_restarts_a_crashed_service_and_says_why():
    out = io.StringIO()
    service = Service(
        name="web",
        argv=[sys.executable, "-c", "import sys; print('listening'); sys.stdout.flush(); sys.exit(3)"],
        env=child_environment({}),
    )
    supervisor = Supervisor([service], out=out, max_crashes=3, crash_window_seconds=60)
    supervisor.start()
    assert supervisor.run() == 1
    log = out.getvalue()
    assert "web stopped unexpectedly (exit code 3). Its last lines:" in log
    assert "    listening" in log
    assert "restarting web in 1 s (crash 1 of 3)" in log
    assert "restarting web in 2 s (crash 2 of 3)" in log
    assert "web crashed 3 times within 60 s; giving up and stopping everything." in log


def test_it_stops_on_request_while_watching():
    out = io.StringIO()
    service = Service(name="worker", argv=[sys.executable, "-c", "import time; time.sleep(600)"], env={})
    supervisor = Supervisor([service], out=out)
    supervisor.start()
    threading.Timer(0.5, supervisor.request_stop).start()
    assert supervisor.run() == 0
    assert service.process.returncode == -15
