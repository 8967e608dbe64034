"""A search page's socket (`/ws/searches/<id>/`): a ping ({"type": "changed"}) whenever the search
or its trials change (a trial starts, reports at a rung, is pruned or ends; the search pauses,
resumes, aborts or ends). The page then reads the search and its plots again from the API, so what
it shows is what is stored; a ping lost while it reconnects costs nothing, as it reads on connect."""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from workbench.core.access import AccessWatch
from workbench.searches.selectors import searches_visible_to


@database_sync_to_async
def _group_for(user, pk: int) -> str | None:
    search = searches_visible_to(user).filter(pk=pk).first()
    return None if search is None else search.group_name


@database_sync_to_async
def _visible(user, pk: int) -> bool:
    return searches_visible_to(user).filter(pk=pk).exists()


class SearchConsumer(AccessWatch, AsyncJsonWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close()
            return
        group = await _group_for(user, int(self.scope["url_route"]["kwargs"]["pk"]))
        if group is None:
            await self.close()  # the same refusal for "missing" and "not yours"
            return
        # Joined before the first ping: a change committed after the page's first read reaches it.
        self.group_name = group
        await self.channel_layer.group_add(self.group_name, self.channel_name)
        await self.accept()
        await self.watch_access(user)
        await self.send_json({"type": "changed"})

    async def disconnect(self, code):
        if hasattr(self, "group_name"):
            await self.channel_layer.group_discard(self.group_name, self.channel_name)
        await self.forget_access()

    async def still_visible(self) -> bool:
        return await _visible(self.scope["user"], int(self.scope["url_route"]["kwargs"]["pk"]))

    async def search_changed(self, message):
        await self.send_json({"type": "changed"})
