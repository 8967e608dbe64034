from channels.generic.websocket import AsyncJsonWebsocketConsumer

from workbench.core.groups import user_group_name


class DashboardConsumer(AsyncJsonWebsocketConsumer):
    """Live updates for the dashboard: status and progress of the user's datasets and runs.

    Events sent to the group `user-<id>` as {"type": "dashboard.update", "payload": {...}} are
    relayed as they are; the consumer does no work of its own.
    """

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close()
            return
        self.group_name = user_group_name(user.pk)
        await self.channel_layer.group_add(self.group_name, self.channel_name)
        await self.accept()
        await self.send_json({"type": "hello", "user": user.username})

    async def disconnect(self, code):
        if hasattr(self, "group_name"):
            await self.channel_layer.group_discard(self.group_name, self.channel_name)

    async def dashboard_update(self, event):
        await self.send_json({"type": "update", **event["payload"]})
