"""A member removed from a project loses its objects' sockets at once (core/access.py), against
a real daphne and Redis with a real websocket client; a non-member's socket is refused."""

from __future__ import annotations

import asyncio

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.support.factories import make_dataset_row
from tests.workbench.test_websocket import session_cookie
from workbench.core.access import ACCESS_REVOKED
from workbench.directory.mapping import apply_groups, parse_group_map
from workbench.projects.models import Project
from workbench.projects.services import member_remove

pytestmark = [pytest.mark.slow]


@pytest.fixture
def paths(shared_work):
    """The run's socket first: it answers once asked for its replay; the others speak on connect."""
    groups = [("run", "runs"), ("dataset", "datasets"), ("search", "searches"), ("benchmark", "benchmarks")]
    return [f"/ws/{group}/{shared_work[kind].pk}/" for kind, group in groups]


async def _open(base: str, path: str, cookie: str):
    url = base.replace("http://", "ws://") + path
    return await connect(url, origin=base, additional_headers={"Cookie": cookie}, open_timeout=10)


def test_it_closes_a_removed_members_sockets_at_once(live_server_url, transactional_db, owner, viewer, paths):
    cookie = session_cookie(viewer)

    async def watch() -> list[int]:
        sockets = [await _open(live_server_url, path, cookie) for path in paths]
        await sockets[0].send('{"since": 0}')  # the run socket answers its replay
        await asyncio.wait_for(sockets[0].recv(), 10)
        for socket in sockets[1:]:
            await asyncio.wait_for(socket.recv(), 10)  # each sends its state on connect
        await asyncio.to_thread(_remove_viewer, owner)
        codes = []
        for socket in sockets:
            with pytest.raises(ConnectionClosed):
                while True:  # anything still in flight, then the close
                    await asyncio.wait_for(socket.recv(), 10)
            codes.append(socket.close_code)
        return codes

    assert asyncio.run(watch()) == [ACCESS_REVOKED] * len(paths)


def _remove_viewer(owner) -> None:
    member_remove(by=owner, project=Project.objects.get(slug="vision-lab"), username="vic")


def test_it_refuses_a_non_members_sockets(live_server_url, transactional_db, other_user, paths):
    cookie = session_cookie(other_user)

    async def attempt(path: str) -> int:
        with pytest.raises(InvalidStatus) as refused:
            await _open(live_server_url, path, cookie)
        return refused.value.response.status_code

    assert [asyncio.run(attempt(path)) for path in paths] == [403] * len(paths)


def test_it_closes_the_sockets_a_user_opened_as_staff_when_the_directory_takes_staff_away(
    live_server_url, transactional_db, owner, django_user_model
):
    dora = django_user_model.objects.create_user("dora", is_staff=True)  # a directory's account: no password
    cookie = session_cookie(dora)
    path = f"/ws/datasets/{make_dataset_row(owner, name='alice private').pk}/"  # shared with no one

    async def watch() -> int:
        socket = await _open(live_server_url, path, cookie)
        await asyncio.wait_for(socket.recv(), 10)  # staff see it: its state on connect
        # Her next sign-in finds her out of the admins' group.
        await asyncio.to_thread(apply_groups, dora, ["vision"], parse_group_map("admins -> staff"),
                                directory_account=True)  # fmt: skip
        with pytest.raises(ConnectionClosed):
            while True:
                await asyncio.wait_for(socket.recv(), 10)
        return socket.close_code

    assert asyncio.run(watch()) == ACCESS_REVOKED
