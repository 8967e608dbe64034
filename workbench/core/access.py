"""An object socket closes the moment its user may no longer see the object (removed from the
project it is shared in), instead of streaming on until the browser reconnects.

Removing a member publishes `access.changed` to the user's access group (core.groups); each
socket of that user reads its row again through the one rule (`still_visible`) and closes with
4403 when the row is gone from the user's sight. Sockets on the default channel layer join the
group there (`AccessWatch`); the run sockets, which have no channel of their own, are told
through the live layer's fan-out (`AccessRelay`).
"""

from __future__ import annotations

from workbench.core.groups import access_group_name

# The close code a page sees when access was taken away (4000-4999: the application's own).
ACCESS_REVOKED = 4403


class AccessWatch:
    """For an AsyncJsonWebsocketConsumer on the default layer: call `watch_access(user)` after
    accepting, and define `still_visible()`."""

    async def watch_access(self, user) -> None:
        self.access_group = access_group_name(user.pk)
        await self.channel_layer.group_add(self.access_group, self.channel_name)

    async def forget_access(self) -> None:
        if hasattr(self, "access_group"):
            await self.channel_layer.group_discard(self.access_group, self.channel_name)

    async def access_changed(self, message) -> None:  # core.groups.ACCESS_CHANGED, as Channels names handlers
        if not await self.still_visible():
            await self.close(code=ACCESS_REVOKED)

    async def still_visible(self) -> bool:  # pragma: no cover - each consumer says
        raise NotImplementedError


class AccessRelay:
    """A watcher of the run fan-out (runs.fanout.Watcher) for one socket's access group: any
    message there makes the socket check its row again."""

    def __init__(self, socket) -> None:
        self.socket = socket

    async def relay(self, text: str) -> None:
        if not await self.socket.still_visible():
            await self.socket.close(code=ACCESS_REVOKED)

    async def close(self, code: int | None = None) -> None:
        await self.socket.close(code=code)
