"""The search page's socket through Channels' communicator, on the real Redis layer: refused to
strangers, a ping on connect and on each committed change of the search."""

import asyncio

import pytest
from asgiref.sync import sync_to_async

from tests.workbench.runs.conftest import TINY_CONFIG
from tests.workbench.runs.web.test_consumer import communicator
from workbench.searches.services import search_create, search_pause

pytestmark = [pytest.mark.django_db(transaction=True)]

SPACE = {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1}}


@pytest.fixture
def search(owner, dataset):
    dataset.status = "building"  # its trials queue and never start
    dataset.save()
    return search_create(
        owner=owner, dataset=dataset, name="s", network="lenet", config=TINY_CONFIG, space=SPACE, gpus="cpu",
        trials=2, parallel=1, sampler="random", seed=1, pruner="none",
    )  # fmt: skip


def test_it_refuses_another_users_search(search, other_user):
    async def attempt():
        socket = communicator(search.pk, other_user, path="searches")
        connected, _ = await socket.connect()
        await socket.disconnect()
        return connected

    assert asyncio.run(attempt()) is False


def test_it_pings_on_connect_and_on_each_change(search, owner):
    async def watch():
        socket = communicator(search.pk, owner, path="searches")
        connected, _ = await socket.connect()
        first = await socket.receive_json_from(timeout=5)
        await sync_to_async(search_pause)(search=search)
        second = await socket.receive_json_from(timeout=5)
        await socket.disconnect()
        return connected, first, second

    assert asyncio.run(watch()) == (True, {"type": "changed"}, {"type": "changed"})
