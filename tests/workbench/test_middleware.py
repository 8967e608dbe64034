"""A request that needs Redis while Redis is stalled (SIGSTOP: its port still accepts connections,
nothing answers) or down answers 503 with words within a few seconds, not a 500 after 5 s."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from html import escape

import pytest
from django.urls import reverse

from tests.conftest import PASSWORD
from workbench.embedded_redis import embedded_redis_command, free_port, wait_until_ready
from workbench.middleware import BROKER_MESSAGE
from workbench.settings import REDIS_REQUEST_TIMEOUT_SECONDS, redis_cache


@pytest.fixture
def stalled_redis(tmp_path, settings):
    """The embedded Redis-compatible server, the cache on it as settings make it, then SIGSTOPped;
    yields a function that lets it go on (SIGCONT)."""
    command = embedded_redis_command(data_dir=tmp_path, port=free_port(), persist=False)
    server = subprocess.Popen(command.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_ready(command.url, process=server)
        settings.CACHES = {"default": redis_cache(command.url)}
        os.kill(server.pid, signal.SIGSTOP)
        yield lambda: os.kill(server.pid, signal.SIGCONT)
    finally:
        os.kill(server.pid, signal.SIGCONT)
        server.kill()
        server.wait()


def _timed(call):
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


@pytest.mark.django_db
def test_it_answers_sign_in_with_503_and_words_while_redis_stalls(client, owner, stalled_redis):
    form = {"username": owner.username, "password": PASSWORD}
    response, seconds = _timed(lambda: client.post(reverse("login"), form))
    assert response.status_code == 503 and seconds < REDIS_REQUEST_TIMEOUT_SECONDS + 4  # a busy 2-core machine
    assert escape(BROKER_MESSAGE) in response.content.decode() and response["Retry-After"] == "60"
    assert "127.0.0.1" not in response.content.decode()

    response, seconds = _timed(lambda: client.post(reverse("api-token"), form))
    assert response.status_code == 503 and seconds < REDIS_REQUEST_TIMEOUT_SECONDS + 4  # a busy 2-core machine
    assert response.json() == {"detail": BROKER_MESSAGE}

    stalled_redis()  # Redis goes on: so does sign-in
    assert client.post(reverse("login"), form).status_code == 302


@pytest.mark.django_db
def test_it_answers_sign_in_with_503_while_redis_is_down(client, owner, settings):
    settings.CACHES = {"default": redis_cache(f"redis://127.0.0.1:{free_port()}/0")}
    response = client.post(reverse("login"), {"username": owner.username, "password": PASSWORD})
    assert response.status_code == 503 and escape(BROKER_MESSAGE) in response.content.decode()
