"""An object socket closes the moment its user may no longer see the object (removed from the
project it is shared in), instead of streaming on until the browser reconnects.

Removing a member, or the directory taking staff away, publishes `access.changed` to the user's
access group (core.groups); each socket of that user reads the user (staff, active) and its row
again through the one rule (`still_visible`) and closes with 4403 when the row is gone from the
user's sight. Sockets on the default channel layer join the
group there (`AccessWatch`); the run sockets, which have no channel of their own, are told
through the live layer's fan-out (`AccessRelay`).
"""

from __future__ import annotations

from channels.db import database_sync_to_async

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
        if not await visible_now(self):
            await self.close(code=ACCESS_REVOKED)

    async def still_visible(self) -> bool:  # pragma: no cover - each consumer says
        raise NotImplementedError


class AccessRelay:
    """A watcher of the run fan-out (runs.fanout.Watcher) for one socket's access group: any
    message there makes the socket check its row again."""

    def __init__(self, socket) -> None:
        self.socket = socket

    async def relay(self, text: str) -> None:
        if not await visible_now(self.socket):
            await self.socket.close(code=ACCESS_REVOKED)

    async def close(self, code: int | None = None) -> None:
        await self.socket.close(code=code)


async def visible_now(socket) -> bool:
    """Whether the socket's row is still in its user's sight, the user read again first: the one
    the socket connected as may have been staff, or active, then."""
    user = socket.scope["user"]
    if user.is_authenticated:
        await database_sync_to_async(user.refresh_from_db)(fields=["is_staff", "is_active"])
        if not user.is_active:
            return False
    return await socket.still_visible()
