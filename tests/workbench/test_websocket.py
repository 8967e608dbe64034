"""Websockets against a real daphne and Redis, with a real client (the `websockets` package)."""

import asyncio
import json

import pytest
from channels.layers import get_channel_layer
from django.test import Client
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from workbench.core.groups import group_publish, user_group_name

pytestmark = [pytest.mark.slow]


def ws_url(live_server_url: str) -> str:
    return live_server_url.replace("http://", "ws://") + "/ws/dashboard/"


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


async def _open(url: str, *, origin: str, cookie: str | None = None):
    headers = {"Cookie": cookie} if cookie else {}
    return await connect(url, origin=origin, additional_headers=headers, open_timeout=10)


def test_it_refuses_an_unauthenticated_socket(live_server_url, transactional_db):
    async def attempt():
        with pytest.raises(InvalidStatus) as refused:
            await _open(ws_url(live_server_url), origin=live_server_url)
        return refused.value.response.status_code

    assert asyncio.run(attempt()) == 403


def test_it_refuses_a_foreign_origin(live_server_url, transactional_db, owner):
    cookie = session_cookie(owner)

    async def attempt():
        with pytest.raises(InvalidStatus) as refused:
            await _open(ws_url(live_server_url), origin="http://evil.example", cookie=cookie)
        return refused.value.response.status_code

    assert asyncio.run(attempt()) == 403


def test_it_accepts_the_owner_and_relays_updates(live_server_url, transactional_db, owner):
    cookie = session_cookie(owner)
    layer = get_channel_layer()

    async def exchange():
        socket = await _open(ws_url(live_server_url), origin=live_server_url, cookie=cookie)
        try:
            hello = json.loads(await asyncio.wait_for(socket.recv(), 10))
            await layer.group_send(
                user_group_name(owner.pk),
                {"type": "dashboard.update", "payload": {"kind": "dataset", "id": 7, "status": "ready"}},
            )
            update = json.loads(await asyncio.wait_for(socket.recv(), 10))
            return hello, update
        finally:
            await socket.close()

    hello, update = asyncio.run(exchange())
    assert hello == {"type": "hello", "user": "alice"}
    assert update == {"type": "update", "kind": "dataset", "id": 7, "status": "ready"}


def test_it_does_not_relay_another_users_updates(live_server_url, transactional_db, owner, other_user):
    cookie = session_cookie(other_user)
    layer = get_channel_layer()

    async def exchange():
        socket = await _open(ws_url(live_server_url), origin=live_server_url, cookie=cookie)
        try:
            await asyncio.wait_for(socket.recv(), 10)  # hello
            await layer.group_send(
                user_group_name(owner.pk), {"type": "dashboard.update", "payload": {"kind": "run", "id": 1}}
            )
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(socket.recv(), 1.5)
        finally:
            await socket.close()

    asyncio.run(exchange())


def test_it_serves_static_files_through_daphne(live_server_url):
    import urllib.request

    with urllib.request.urlopen(f"{live_server_url}/static/vendor/plotly.min.js", timeout=10) as response:
        assert response.status == 200
        assert b"plotly.js" in response.read(200)


def test_it_relays_to_the_socket_what_sync_code_publishes(live_server_url, transactional_db, owner):
    # The dashboard's publishers (a build in a worker, a view) are sync code: group_publish reaches
    # the owner's socket through async_to_sync(group_send) on the real channel layer.
    cookie = session_cookie(owner)
    message = {"type": "dashboard.update", "payload": {"kind": "run", "id": 3, "state": "done"}}

    async def exchange():
        socket = await _open(ws_url(live_server_url), origin=live_server_url, cookie=cookie)
        try:
            await asyncio.wait_for(socket.recv(), 10)  # hello
            # In a thread of its own, as sync code is: async_to_sync refuses a thread running a loop.
            await asyncio.to_thread(group_publish, user_group_name(owner.pk), message)
            return json.loads(await asyncio.wait_for(socket.recv(), 10))
        finally:
            await socket.close()

    assert asyncio.run(exchange()) == {"type": "update", "kind": "run", "id": 3, "state": "done"}
