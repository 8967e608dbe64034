"""Live events of a run, relayed to every socket of this process that watches it.

The channel layer brings each published batch to each daphne process once (the `live` alias:
Redis pub/sub). Giving every socket its own channel as well would cost, per socket and batch, a
queue, a task, a wait and a dispatch: with 200 viewers of one run that was most of the fan-out's
time (bench/bench_live_stream.py). Here one subscription per run and process reads the batch and
hands its text to each watching socket in one loop. The sockets only relay it (daphne buffers
what a slow browser has not read yet), so one slow viewer does not hold the others back.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Protocol

from channels.layers import get_channel_layer
from django.conf import settings

log = logging.getLogger(__name__)


class Watcher(Protocol):
    async def relay(self, text: str) -> None: ...

    async def close(self, code: int | None = None) -> None: ...


class RunFanout:
    """One event loop's subscriptions: group name -> the sockets that watch it."""

    def __init__(self, layer) -> None:
        self.layer = layer
        self.watchers: dict[str, set[Watcher]] = {}
        self.relays: dict[str, asyncio.Task] = {}
        self.subscribed: dict[str, asyncio.Future] = {}

    async def join(self, group: str, watcher: Watcher) -> None:
        """Returns once events published to `group` from now on reach `watcher`."""
        self.watchers.setdefault(group, set()).add(watcher)
        if group not in self.relays:
            self.subscribed[group] = asyncio.get_running_loop().create_future()
            self.relays[group] = asyncio.create_task(self._relay(group, self.subscribed[group]))
        # Shielded: a socket that goes away while it waits must not cancel the others' wait.
        await asyncio.shield(self.subscribed[group])

    def leave(self, group: str, watcher: Watcher) -> None:
        watchers = self.watchers.get(group)
        if watchers is None:
            return
        watchers.discard(watcher)
        if not watchers:
            del self.watchers[group]
            self.subscribed.pop(group)
            self.relays.pop(group).cancel()

    async def _relay(self, group: str, subscribed: asyncio.Future) -> None:
        channel = None
        try:
            channel = await self.layer.new_channel()
            await self.layer.group_add(group, channel)
            subscribed.set_result(None)
            while True:
                message = await self.layer.receive(channel)
                for watcher in list(self.watchers.get(group, ())):
                    try:
                        await watcher.relay(message["text"])
                    except Exception:
                        # That socket alone: its browser reconnects and replays what it missed.
                        log.warning("could not relay to a socket of %s; closing it", group, exc_info=True)
                        await watcher.close(code=1011)
        except asyncio.CancelledError:
            if not subscribed.done():
                subscribed.cancel()
            raise
        except Exception as error:
            watchers = self.watchers.pop(group, set()) if self.subscribed.get(group) is subscribed else set()
            if watchers:
                del self.subscribed[group], self.relays[group]
            if not subscribed.done():
                subscribed.set_exception(error)  # join() raises it: the socket is refused
            else:
                # The browsers reconnect and ask for a replay of what they missed.
                log.warning("relay of %s failed; closing its %d sockets", group, len(watchers), exc_info=True)
                for watcher in watchers:
                    await watcher.close(code=1011)
        finally:
            if channel is not None:
                await self.layer.group_discard(group, channel)


_fanouts: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RunFanout] = weakref.WeakKeyDictionary()


def fanout() -> RunFanout:
    """The running event loop's fan-out of run events (daphne has one loop; tests make several)."""
    loop = asyncio.get_running_loop()
    if loop not in _fanouts:
        _fanouts[loop] = RunFanout(get_channel_layer(settings.LIVE_CHANNEL_LAYER))
    return _fanouts[loop]
