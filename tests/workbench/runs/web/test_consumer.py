"""The run and dataset websocket consumers through Channels' communicator, on the real Redis layer."""

import asyncio
import json

import numpy as np
import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from workbench.asgi import application
from workbench.core.groups import access_group_name
from workbench.runs import series
from workbench.runs.lifecycle import run_events_append
from workbench.runs.models import Run

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


def test_it_relays_to_every_socket_of_a_run_through_one_subscription(run, owner):
    from workbench.runs.fanout import fanout

    async def exchange():
        sockets = [communicator(run.pk, owner) for _ in range(3)]
        for socket in sockets:
            assert (await socket.connect())[0]
        relays = dict(fanout().relays)
        await sockets[0].disconnect()  # one leaves: the others still get every batch
        await asyncio.to_thread(run_events_append, run_id=run.pk, events=[metrics(1), metrics(2)])
        received = [await socket.receive_json_from(timeout=5) for socket in sockets[1:]]
        for socket in sockets[1:]:
            await socket.disconnect()
        await asyncio.sleep(0)  # the cancelled relay task finishes
        return relays, received, dict(fanout().relays)

    relays, received, after = asyncio.run(exchange())
    # One subscription for the run's events and one for its viewer's access (core/access.py),
    # however many sockets.
    assert list(relays) == [run.group_name, access_group_name(owner.pk)]
    assert [[event["seq"] for event in message["events"]] for message in received] == [[2, 3], [2, 3]]
    assert after == {}  # the last socket's departure ended the subscription


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

    with mock.patch("workbench.runs.lifecycle.publish_run_events"):
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


def test_it_closes_when_the_run_is_deleted_under_it(run, owner):
    async def exchange():
        socket = communicator(run.pk, owner)
        assert (await socket.connect())[0]
        await asyncio.to_thread(lambda: Run.objects.filter(pk=run.pk).delete())
        await socket.send_json_to({"since": 0})
        reply = await socket.receive_json_from(timeout=5)
        closed = await socket.receive_output(timeout=5)
        await socket.disconnect()
        return reply, closed

    reply, closed = asyncio.run(exchange())
    assert reply == {"type": "error", "message": f"run {run.pk} was deleted"}
    assert closed == {"type": "websocket.close", "code": 4404}


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
    dataset = make_dataset_row(
        owner, name="flowers", status=Dataset.Status.BUILDING, progress_done=10, progress_total=40
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
    layer = get_channel_layer(settings.LIVE_CHANNEL_LAYER)

    async def listen():
        channel = await layer.new_channel()
        await layer.group_add(Run.objects.get(pk=run.pk).group_name, channel)
        await asyncio.to_thread(run_events_append, run_id=run.pk, events=[metrics(1)])
        return await asyncio.wait_for(layer.receive(channel), 5)

    message = asyncio.run(listen())
    assert message["type"] == "run.events"
    assert json.loads(message["text"])["events"][0]["seq"] == 2


# ------------------------------------------------------------------ a real daphne, Redis and client


class StreamClient:
    """The page's protocol in Python: apply in sequence order, drop duplicates, replay on a gap."""

    def __init__(self) -> None:
        self.last_seq = 0
        self.events: dict[int, dict] = {}
        self.replays = 0
        self.gaps = 0

    def apply_replay(self, replay: dict) -> None:
        assert not replay["downsampled"]
        self.replays += 1
        for event in replay["events"]:
            if event["seq"] > self.last_seq:
                assert event["seq"] not in self.events
                self.events[event["seq"]] = event
        self.last_seq = max(self.last_seq, replay["last_seq"])

    def apply_live(self, events: list[dict]) -> bool:
        """False when a gap was seen (the caller asks for a replay)."""
        for event in sorted(events, key=lambda e: e["seq"]):
            if event["seq"] <= self.last_seq:
                continue
            if event["seq"] > self.last_seq + 1:
                self.gaps += 1
                return False
            self.events[event["seq"]] = event
            self.last_seq = event["seq"]
        return True

    async def follow(self, socket, until) -> None:
        import json

        await socket.send(json.dumps({"since": self.last_seq}))
        waiting = True
        while not until(self):
            message = json.loads(await asyncio.wait_for(socket.recv(), 10))
            if message["type"] == "replay":
                self.apply_replay(message)
                waiting = False
            elif message["type"] == "events" and not waiting and not self.apply_live(message["events"]):
                await socket.send(json.dumps({"since": self.last_seq}))
                waiting = True


@pytest.mark.slow
def test_it_ends_a_dropped_client_with_the_stored_series_exactly(live_server_url, run, owner):
    import threading
    import time

    from websockets.asyncio.client import connect

    url = live_server_url.replace("http://", "ws://") + f"/ws/runs/{run.pk}/"
    headers = {"Cookie": cookie_for(owner).decode()}
    total = 600

    def trainer():
        for first in range(1, total + 1, 4):
            run_events_append(run_id=run.pk, events=[metrics(s) for s in range(first, first + 4)])
            time.sleep(0.005)

    async def watch() -> StreamClient:
        client = StreamClient()
        producer = threading.Thread(target=trainer)
        async with connect(url, origin=live_server_url, additional_headers=headers) as socket:
            producer.start()
            await client.follow(socket, until=lambda c: c.last_seq >= 150)
            socket.transport.abort()  # a dropped network: no close handshake
        await asyncio.sleep(0.3)  # events keep coming while the client is away
        async with connect(url, origin=live_server_url, additional_headers=headers) as socket:
            await client.follow(socket, until=lambda c: c.last_seq >= total + 1)
        producer.join()
        return client

    client = asyncio.run(watch())
    stored = list(run.events.order_by("seq").values_list("seq", "step", "data"))
    assert [seq for seq, _, _ in stored] == list(range(1, total + 2))
    held = sorted(client.events.values(), key=lambda e: e["seq"])
    assert [e["seq"] for e in held] == list(range(1, total + 2))  # no gap, no duplicate
    mine = [(e["seq"], e["step"], e["loss"]) for e in held if e["type"] == "metrics"]
    assert mine == [(seq, step, data["loss"]) for seq, step, data in stored if step is not None]
    assert client.replays >= 2


@pytest.mark.slow
def test_it_keeps_an_idle_socket_open(live_server_url, run, owner):
    """A run page open while nothing happens (a queued run) must stay connected.

    channels_redis blocks on BZPOPMIN for 5 s; redis-py 8 defaults socket_timeout to 5 s, so an idle
    consumer dies with "Timeout reading from redis" (close 1011) after ~5-10 s unless the channel
    layer's host sets a longer socket_timeout (see the report: workbench/settings.py CHANNEL_LAYERS).
    """
    import json
    import threading

    from websockets.asyncio.client import connect

    url = live_server_url.replace("http://", "ws://") + f"/ws/runs/{run.pk}/"
    headers = {"Cookie": cookie_for(owner).decode()}

    async def idle():
        async with connect(url, origin=live_server_url, additional_headers=headers) as socket:
            await socket.send(json.dumps({"since": 0}))
            await asyncio.wait_for(socket.recv(), 10)
            await asyncio.sleep(8)
            appender = threading.Thread(target=run_events_append, kwargs={"run_id": run.pk, "events": [metrics(1)]})
            appender.start()
            message = json.loads(await asyncio.wait_for(socket.recv(), 10))
            appender.join()
            return message

    assert asyncio.run(idle())["events"][0]["seq"] == 2
