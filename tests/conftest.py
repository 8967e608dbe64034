"""Shared fixtures: users, a logged-in client, and the real services the suite runs against.

- `owner`, `other_user`, `staff_user`: users whose password is PASSWORD.
- `owner_client`: a Django test Client logged in as `owner`.
- `celery_worker`: a real Celery worker process (threads pool) on the suite's Redis, using the
  test database; tests that need it use `transactional_db` so the worker sees committed rows.
- `live_server_url`: a real daphne (HTTP + websockets) serving the app on the test database.
- `browser` / `page`: Debian's Chromium driven by Playwright; `log_in(page, base_url, username)`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from tests.support.waiting import wait_until
from workbench.embedded_redis import free_port
from workbench.supervisor import celery_worker_argv
from workbench.workers.processes import die_with_parent

# Playwright's sync API keeps an event loop in the main thread, which Django's ORM would take for
# async code. Only this test process relaxes the check; child processes get a clean environment.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

PASSWORD = "correct horse battery staple 42"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.hookimpl(trylast=True)  # after pytest-django's own ordering of the database tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The trainer's tests first, on a quiet machine. They are CPU-bound (torch's thread pool
    spins on two cores) and need none of the suite's services; run after them, beside an idle
    worker, server and their children, the export matrix took four times as long as alone.

    The browser's tests last, so that one Chromium serves them all (see `browser`)."""
    items.sort(key=lambda item: (not item.nodeid.startswith("tests/trainer/"), "browser" in item.fixturenames))


@pytest.fixture(autouse=True)
def _suite_worker_out_of_sight(request):
    """The suite's Celery worker (`celery_worker`) beats into the test database from its own
    process, so once it has started on this process of the suite, a test inside a transaction
    sees its host among the live ones: the scheduler placed a run on it beside the test's
    simulated hosts, and its housekeeping held the pass lock. Whether it has started depends on
    which files ran before on this process. A test inside a transaction cannot use that worker
    (it does not see uncommitted rows), so its host is taken out of the test's view; the rollback
    gives it back. Tests that use the worker commit (transactional_db) and keep it."""
    if "transactional_db" in request.fixturenames or "celery_worker" in request.fixturenames:
        return
    marker = request.node.get_closest_marker("django_db")
    if marker is None and "db" not in request.fixturenames:
        return
    if marker is not None and (marker.kwargs.get("transaction") or (marker.args and marker.args[0])):
        return
    request.getfixturevalue("db")
    from workbench.workers.models import WorkerHost

    # Every row: the test has made none yet, and the worker's own is marked simulated (its GPUs are).
    WorkerHost.objects.all().delete()


@pytest.fixture
def housekeeping_held():
    """Holds the housekeeping pass's lock for the test: the suite's worker, if it runs, makes no
    pass (scheduling, searches, stale jobs) over the rows the test commits and moves on itself.
    Waits for a pass in flight to end first."""
    from django.core.cache import cache

    from workbench.workers.heartbeat import PASS_LOCK

    wait_until(lambda: cache.add(PASS_LOCK, "tests", timeout=600), what="the worker's housekeeping pass to end")
    yield
    cache.delete(PASS_LOCK)


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("alice", "alice@example.com", PASSWORD)


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("bob", "bob@example.com", PASSWORD)


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_user("carol", "carol@example.com", PASSWORD, is_staff=True)


@pytest.fixture
def owner_client(client, owner):
    client.force_login(owner)
    return client


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a service process: this suite's settings, data dir, Redis and test DB."""
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        WORKBENCH_USE_TEST_DATABASE="1",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=str(REPO_ROOT),
    )
    env.update(extra)
    return env


class ServiceProcess:
    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.log_path = Path(settings.DATA_DIR) / f"{name}.log"
        self.log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
        )

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            pytest.fail(f"{self.name} exited with {self.process.returncode}:\n{self.tail()}")

    def kill(self) -> None:
        """SIGKILL, as a crash: no clean-up runs in the process."""
        self.process.kill()
        self.process.wait()
        self.log.close()

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def start_worker(name: str, **env: str) -> ServiceProcess:
    """A real Celery worker process named `name@<this host>`, answering pings before it returns."""
    import socket

    from workbench.celery import app

    nodename = f"{name}@{socket.gethostname()}"
    argv = celery_worker_argv(nodename=nodename, concurrency=4, extra=("--without-mingle", "--without-gossip"))
    worker = ServiceProcess(name, argv, child_env(**env))
    worker.nodename = nodename

    def answers() -> bool:
        worker.check_alive()
        return bool(app.control.ping(destination=[nodename], timeout=0.5))

    try:
        wait_until(answers, what=lambda: f"the Celery worker {nodename} to answer a ping:\n{worker.tail()}", timeout=90)
    except BaseException:  # pytest.fail's exception is no Exception: the worker must not outlive it
        worker.stop()
        raise
    return worker


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker):
    # Two simulated GPUs besides the CPU, so multi-GPU scheduling runs for real (on the CPU).
    worker = start_worker("test-worker", WORKBENCH_SIMULATED_GPUS="2")
    yield worker
    worker.stop()


@contextmanager
def web_server(*, name: str = "daphne", port: int | None = None, **env: str) -> Iterator[str]:
    """The workbench's web process as the suite runs it (daphne, this suite's settings and test
    database), with `env` added to its environment; its URL while it runs."""
    port = port or free_port()
    server = ServiceProcess(
        name,
        [sys.executable, "-m", "daphne", "--bind", "127.0.0.1", "--port", str(port), "workbench.asgi:application"],
        child_env(**env),
    )
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()

    def answers() -> bool:
        server.check_alive()
        try:
            # One probe waits for its answer, as long as the 120 s allow: daphne imports the app on
            # its first request, which took 11 s on a busy machine, and a probe that gave up sooner
            # was asked again and again until the deadline. The login page, not /healthz, whose
            # Redis round trips add up to 3 s.
            timeout = max(1.0, 120 - (time.monotonic() - started))
            urllib.request.urlopen(f"{url}/accounts/login/", timeout=timeout).close()
        except urllib.error.HTTPError:
            return True  # it answers
        except OSError:
            return False
        return True

    try:
        wait_until(answers, what=lambda: f"daphne to answer:\n{server.tail()}", timeout=120)
        yield url
    finally:  # pytest.fail's exception is no Exception: daphne must not outlive it
        server.stop()


@pytest.fixture(scope="session")
def live_server_url(django_db_setup):
    with web_server() as url:
        yield url


class SharedChromium:
    """One Chromium for the browser's tests, stopped before any other test runs.

    Chromium costs a second or more of CPU to start, and two dozen modules use it, so the browser's
    tests share one. But Playwright's sync API keeps an asyncio loop running in the main thread
    while it is started, which breaks a test that calls asyncio.run() or async_to_sync (the
    websocket and publishing tests). pytest_collection_modifyitems runs the browser's tests last,
    which orders a serial run; a parallel run (xdist, --dist loadfile) hands each process whole
    files, so a file of socket tests can follow one with a browser test. Hence the stop in
    pytest_runtest_setup for every test that does not use the browser."""

    def __init__(self) -> None:
        self._playwright = None
        self._chromium = None

    def get(self):
        if self._chromium is None:
            from playwright.sync_api import sync_playwright

            if not Path(CHROMIUM).exists():
                pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (make test does it)")
            self._playwright = sync_playwright().start()
            try:
                self._chromium = self._playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            except BaseException:
                self.stop()
                raise
        return self._chromium

    def stop(self) -> None:
        chromium, playwright = self._chromium, self._playwright
        self._chromium = self._playwright = None
        try:
            if chromium is not None:
                chromium.close()
        finally:
            if playwright is not None:
                playwright.stop()


shared_chromium = SharedChromium()


def pytest_runtest_setup(item: pytest.Item) -> None:
    if "browser" not in item.fixturenames:
        shared_chromium.stop()


def pytest_sessionfinish(session: pytest.Session) -> None:
    shared_chromium.stop()


@pytest.fixture
def browser():
    return shared_chromium.get()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


def log_in(page, base_url: str, username: str) -> None:
    """Signs `username` in and opens Home, where the login form leads. By a session cookie: the
    form itself is tested in tests/workbench/test_e2e_login.py, and filling it in cost each of the
    browser's tests one more page load and a post."""
    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": base_url}])
    page.goto(f"{base_url}/")
    page.wait_for_load_state()
