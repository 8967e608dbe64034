"""A benchmark page's socket (`/ws/benchmarks/<id>/`): the benchmark as it is on connect, then
each update (state, progress, the cells so far with their speed-up) as the runner stores it."""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from workbench.benchmarks.selectors import benchmark_payload, benchmarks_visible_to
from workbench.core.access import AccessWatch


@database_sync_to_async
def _payload_for(user, pk: int) -> dict | None:
    benchmark = benchmarks_visible_to(user).filter(pk=pk).first()
    return None if benchmark is None else {"group": benchmark.group_name, **benchmark_payload(benchmark)}


@database_sync_to_async
def _visible(user, pk: int) -> bool:
    return benchmarks_visible_to(user).filter(pk=pk).exists()


class BenchmarkConsumer(AccessWatch, AsyncJsonWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close()
            return
        payload = await _payload_for(user, int(self.scope["url_route"]["kwargs"]["pk"]))
        if payload is None:
            await self.close()  # the same refusal for "missing" and "not yours"
            return
        # Joined before the snapshot is read again below: an update is in it or arrives after.
        self.group_name = payload.pop("group")
        await self.channel_layer.group_add(self.group_name, self.channel_name)
        await self.accept()
        await self.watch_access(user)
        fresh = await _payload_for(user, payload["id"])
        if fresh is not None:  # gone or out of sight meanwhile: the first read stands
            fresh.pop("group", None)
        await self.send_json({"type": "snapshot", **(fresh or payload)})

    async def disconnect(self, code):
        if hasattr(self, "group_name"):
            await self.channel_layer.group_discard(self.group_name, self.channel_name)
        await self.forget_access()

    async def still_visible(self) -> bool:
        return await _visible(self.scope["user"], int(self.scope["url_route"]["kwargs"]["pk"]))

    async def benchmark_update(self, message):
        await self.send_json({"type": "update", **{k: v for k, v in message.items() if k != "type"}})
