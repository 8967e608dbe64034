"""The per-process fan-out of run events, on the real `live` channel layer (Redis pub/sub)."""

import asyncio

from channels.layers import get_channel_layer
from django.conf import settings

from workbench.runs.fanout import RunFanout


class Socket:
    """What the fan-out needs of a consumer: relay() and close()."""

    def __init__(self, broken: bool = False) -> None:
        self.broken = broken
        self.texts: list[str] = []
        self.closed_with: int | None = None

    async def relay(self, text: str) -> None:
        if self.broken:
            raise ConnectionError("the transport is gone")
        self.texts.append(text)

    async def close(self, code: int | None = None) -> None:
        self.closed_with = code


def test_it_closes_only_the_socket_that_fails_and_relays_on():
    layer = get_channel_layer(settings.LIVE_CHANNEL_LAYER)
    group = "run-fanout-test"

    async def scenario():
        fanout = RunFanout(layer)
        broken, healthy = Socket(broken=True), Socket()
        await fanout.join(group, broken)  # first in the set's order or not: both are tried
        await fanout.join(group, healthy)
        for text in ("first", "second"):
            await layer.group_send(group, {"type": "run.events", "text": text})
        for _ in range(100):
            if len(healthy.texts) == 2:
                break
            await asyncio.sleep(0.02)
        fanout.leave(group, broken)
        fanout.leave(group, healthy)
        return healthy.texts, broken.closed_with, fanout.relays

    texts, closed_with, relays = asyncio.run(scenario())
    assert texts == ["first", "second"]
    assert closed_with == 1011
    assert relays == {}


def test_it_refuses_the_join_when_redis_is_unreachable():
    from channels_redis.pubsub import RedisPubSubChannelLayer
    from redis.exceptions import ConnectionError as RedisConnectionError

    from workbench.embedded_redis import free_port

    layer = RedisPubSubChannelLayer(hosts=[f"redis://127.0.0.1:{free_port()}"])  # nothing listens there

    async def scenario():
        fanout = RunFanout(layer)
        try:
            await fanout.join("run-1", Socket())
        except RedisConnectionError:
            return fanout.watchers, fanout.relays, fanout.subscribed
        return "joined"

    assert asyncio.run(scenario()) == ({}, {}, {})
