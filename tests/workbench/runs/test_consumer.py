"""The run and dataset websocket consumers through Channels' communicator, on the real Redis layer."""

import asyncio

import numpy as np
import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from datasets.models import Dataset
from workbench.asgi import application
from workbench.runs import series
from workbench.runs.models import Run
from workbench.runs.services import run_create, run_events_append

ORIGIN = b"http://127.0.0.1"

pytestmark = [pytest.mark.django_db(transaction=True)]


def cookie_for(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


def communicator(run_id: int, user=None, origin: bytes = ORIGIN, path: str = "runs") -> WebsocketCommunicator:
    headers = [(b"origin", origin), (b"host", b"127.0.0.1")]
    if user is not None:
        headers.append((b"cookie", cookie_for(user)))
    return WebsocketCommunicator(application, f"/ws/{path}/{run_id}/", headers=headers)


@pytest.fixture
def run(owner):
    dataset = Dataset.objects.create(owner=owner, name="bars", status=Dataset.Status.READY)
    run = run_create(owner=owner, dataset=dataset, name="r", network="lenet", config={}, device_request={"kind": "cpu"})
    series.forget(run.pk)
    return run


def metrics(step: int) -> dict:
    return {"type": "metrics", "time": 1000.0 + step, "step": step, "epoch": step / 10, "loss": 1 / step}


def test_it_refuses_an_anonymous_socket(run):
    async def attempt():
        socket = communicator(run.pk)
        connected, _ = await socket.connect()
        await socket.disconnect()
        return connected

    assert asyncio.run(attempt()) is False


def test_it_refuses_another_users_run_and_a_missing_one(run, other_user):
    async def attempt(run_id):
        socket = communicator(run_id, other_user)
        connected, _ = await socket.connect()
        await socket.disconnect()
        return connected

    assert asyncio.run(attempt(run.pk)) is False
    assert asyncio.run(attempt(run.pk + 1000)) is False


def test_it_refuses_a_foreign_origin(run, owner):
    async def attempt():
        socket = communicator(run.pk, owner, origin=b"http://evil.example")
        connected, _ = await socket.connect()
        await socket.disconnect()
        return connected

    assert asyncio.run(attempt()) is False


def test_it_lets_staff_watch_any_run(run, staff_user):
    async def attempt():
        socket = communicator(run.pk, staff_user)
        connected, _ = await socket.connect()
        await socket.send_json_to({"since": 0})
        reply = await socket.receive_json_from(timeout=5)
        await socket.disconnect()
        return connected, reply

    connected, reply = asyncio.run(attempt())
    assert connected and reply["type"] == "replay" and reply["events"][0]["state"] == "queued"


def test_it_replays_everything_after_the_given_sequence(run, owner):
    run_events_append(run_id=run.pk, events=[metrics(step) for step in range(1, 21)])  # seq 2..21

    async def exchange():
        socket = communicator(run.pk, owner)
        assert (await socket.connect())[0]
        await socket.send_json_to({"since": 11})
        reply = await socket.receive_json_from(timeout=5)
        await socket.disconnect()
        return reply

    reply = asyncio.run(exchange())
    assert reply["since"] == 11 and reply["last_seq"] == 21 and not reply["downsampled"]
    assert [event["seq"] for event in reply["events"]] == list(range(12, 22))
    first = reply["events"][0]
    assert first == {"seq": 12, "type": "metrics", "time": 1011.0, "step": 11, "epoch": 1.1, "loss": 1 / 11}


def test_it_relays_live_events_in_order_after_the_replay(run, owner):
    async def exchange():
        socket = communicator(run.pk, owner)
        assert (await socket.connect())[0]
        await socket.send_json_to({"since": 0})
        replay = await socket.receive_json_from(timeout=5)
        # Appended from another thread, as the worker does: stored, then published after commit.
        for first in range(1, 31, 5):
            await asyncio.to_thread(
                run_events_append, run_id=run.pk, events=[metrics(s) for s in range(first, first + 5)]
            )
        received = []
        while len(received) < 30:
            message = await socket.receive_json_from(timeout=5)
            assert message["type"] == "events"
            received += message["events"]
        await socket.disconnect()
        return replay, received

    replay, received = asyncio.run(exchange())
    assert replay["last_seq"] == 1
    assert [event["seq"] for event in received] == list(range(2, 32))
    assert [event["step"] for event in received] == list(range(1, 31))


def test_it_fills_a_gap_when_the_client_asks_again(run, owner):
    async def exchange():
        socket = communicator(run.pk, owner)
        assert (await socket.connect())[0]
        await socket.send_json_to({"since": 0})
        await socket.receive_json_from(timeout=5)
        # Events stored while the layer dropped them for this socket (a slow consumer): stored,
        # never published. Then one more arrives live: the client sees seq jump from 1 to 12.
        await asyncio.to_thread(_append_unpublished, run.pk, [metrics(s) for s in range(1, 11)])
        await asyncio.to_thread(run_events_append, run_id=run.pk, events=[metrics(11)])
        live = await socket.receive_json_from(timeout=5)
        await socket.send_json_to({"since": 1})
        replay = await socket.receive_json_from(timeout=5)
        await socket.disconnect()
        return live, replay

    live, replay = asyncio.run(exchange())
    assert [event["seq"] for event in live["events"]] == [12]
    assert [event["seq"] for event in replay["events"]] == list(range(2, 13))


def _append_unpublished(run_id: int, events: list[dict]) -> None:
    from unittest import mock

    with mock.patch("workbench.runs.services.publish_run_events"):
        run_events_append(run_id=run_id, events=events)


def test_it_sends_a_long_history_as_downsampled_series(run, owner):
    losses = np.linspace(3, 0.1, series.REPLAY_FULL_LIMIT + 2000)
    losses[4321] = 42.0
    events = [{**metrics(step), "loss": float(loss)} for step, loss in enumerate(losses, start=1)]
    run_events_append(run_id=run.pk, events=events)

    async def exchange():
        socket = communicator(run.pk, owner)
        assert (await socket.connect())[0]
        await socket.send_json_to({"since": 0})
        reply = await socket.receive_json_from(timeout=20)
        await socket.disconnect()
        return reply

    reply = asyncio.run(exchange())
    assert reply["downsampled"] and reply["last_seq"] == len(losses) + 1
    loss = reply["series"]["loss"]["points"]
    assert len(loss["value"]) <= series.MAX_POINTS and 42.0 in loss["value"]
    assert set(loss) == {"seq", "step", "epoch", "time", "images", "value"}


def test_it_answers_a_malformed_request_with_an_error(run, owner):
    async def exchange():
        socket = communicator(run.pk, owner)
        assert (await socket.connect())[0]
        await socket.send_json_to({"since": "yesterday"})
        reply = await socket.receive_json_from(timeout=5)
        await socket.disconnect()
        return reply

    assert asyncio.run(exchange())["type"] == "error"


def test_it_streams_a_dataset_build_to_its_owner_only(owner, other_user):
    dataset = Dataset.objects.create(
        owner=owner, name="flowers", status=Dataset.Status.BUILDING, progress_done=10, progress_total=40
    )
    payload = {"done": 20, "total": 40, "images_per_second": 10.0, "eta_seconds": 2.0, "status": "building"}

    async def exchange():
        refused = communicator(dataset.pk, other_user, path="datasets")
        assert not (await refused.connect())[0]
        socket = communicator(dataset.pk, owner, path="datasets")
        assert (await socket.connect())[0]
        first = await socket.receive_json_from(timeout=5)
        await get_channel_layer().group_send(f"dataset-{dataset.pk}", {"type": "dataset.progress", "payload": payload})
        second = await socket.receive_json_from(timeout=5)
        await socket.disconnect()
        return first, second

    first, second = asyncio.run(exchange())
    assert first == {"type": "progress", "id": dataset.pk, "done": 10, "total": 40, "images_per_second": 0.0,
                     "eta_seconds": None, "status": "building"}  # fmt: skip
    assert second == {"type": "progress", "id": dataset.pk, **payload}


def test_it_publishes_to_the_runs_group(run):
    # The producer side the consumer relies on: run_events_append publishes to run-<id>.
    layer = get_channel_layer()

    async def listen():
        channel = await layer.new_channel()
        await layer.group_add(Run.objects.get(pk=run.pk).group_name, channel)
        await asyncio.to_thread(run_events_append, run_id=run.pk, events=[metrics(1)])
        return await asyncio.wait_for(layer.receive(channel), 5)

    message = asyncio.run(listen())
    assert message["type"] == "run.events" and message["events"][0]["seq"] == 2
