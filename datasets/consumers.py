"""The dataset page's websocket: a build's state on connect, then each progress message."""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from datasets.models import Dataset
from datasets.selectors import datasets_visible_to
from workbench.core.access import AccessWatch


@database_sync_to_async
def _dataset_for(user, pk: int) -> Dataset | None:
    return datasets_visible_to(user).filter(pk=pk).first()


class DatasetConsumer(AccessWatch, AsyncJsonWebsocketConsumer):
    """A dataset build's progress: the row's state on connect, then each `dataset.progress`."""

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close()
            return
        dataset = await _dataset_for(user, int(self.scope["url_route"]["kwargs"]["pk"]))
        if dataset is None:
            await self.close()
            return
        self.dataset_id = dataset.pk
        self.group_name = dataset.progress_group_name
        await self.channel_layer.group_add(self.group_name, self.channel_name)
        await self.accept()
        await self.watch_access(user)
        await self.send_json({"type": "progress", "id": dataset.pk, **dataset.progress_payload()})

    async def disconnect(self, code):
        if hasattr(self, "group_name"):
            await self.channel_layer.group_discard(self.group_name, self.channel_name)
        await self.forget_access()

    async def still_visible(self) -> bool:
        return await _dataset_for(self.scope["user"], self.dataset_id) is not None

    async def dispatch(self, message):
        # Channels runs close_old_connections() in its one sync thread before every handler;
        # progress touches no database, and many sockets' hops would queue behind each other.
        if message["type"] == "dataset.progress":
            await self.dataset_progress(message)
        else:
            await super().dispatch(message)

    async def dataset_progress(self, message):
        # {"type": "dataset.progress", "payload": {done, total, images_per_second, eta_seconds, status}}
        payload = message.get("payload") or {k: v for k, v in message.items() if k != "type"}
        await self.send_json({"type": "progress", "id": self.dataset_id, **payload})
