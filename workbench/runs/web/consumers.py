"""Live streams of one run (`/ws/runs/<id>/`) and of one dataset build (`/ws/datasets/<id>/`).

Both check in connect() that the user is logged in and owns the object (or is staff), and close
before accepting otherwise (the browser sees a 403). They only relay: the database is read
through database_sync_to_async, once per (re)connect, never per live event.

Run protocol (docs/formats.md, "Live stream"):
- client -> server: {"since": n}: the last sequence number the client holds (0 at first); sent on
  connect, and again whenever the client sees a gap in the sequence numbers of live events.
- server -> client: {"type": "replay", "since", "last_seq", "downsampled", "events", "series"}
  answering it, then {"type": "events", "events": [...]} as the run publishes them.
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from workbench.core.access import AccessRelay
from workbench.core.groups import access_group_name
from workbench.runs.fanout import fanout
from workbench.runs.models import Run
from workbench.runs.selectors import runs_visible_to
from workbench.runs.series import replay_message


@database_sync_to_async
def _run_for(user, pk: int) -> Run | None:
    return runs_visible_to(user).filter(pk=pk).first()


@database_sync_to_async
def _replay(run: Run, since: int) -> dict:
    return replay_message(run, since)


class RunConsumer(AsyncJsonWebsocketConsumer):
    """Replays a run's events after the client's last sequence number, then relays live ones."""

    # No channel of its own: live events come through the process's fan-out (see fanout.py).
    channel_layer_alias = None

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close()
            return
        self.run = await _run_for(user, int(self.scope["url_route"]["kwargs"]["pk"]))
        if self.run is None:
            await self.close()  # the same refusal for "missing" and "not yours"
            return
        # Joined before the client asks for its replay: an event is either in the replay (stored
        # by then) or arrives live (published after), so nothing falls between the two.
        self.group_name = self.run.group_name
        await self.join_live()
        self.access = (access_group_name(user.pk), AccessRelay(self))
        await fanout().join(*self.access)
        await self.accept()

    async def disconnect(self, code):
        if hasattr(self, "group_name"):
            await self.leave_live()
        if hasattr(self, "access"):
            fanout().leave(*self.access)

    async def still_visible(self) -> bool:
        return await _run_for(self.scope["user"], self.run.pk) is not None

    async def join_live(self) -> None:
        await fanout().join(self.group_name, self)

    async def leave_live(self) -> None:
        fanout().leave(self.group_name, self)

    async def receive_json(self, content, **kwargs):
        since = content.get("since") if isinstance(content, dict) else None
        if not isinstance(since, int) or isinstance(since, bool) or since < 0:
            await self.send_json({"type": "error", "message": 'send {"since": <last sequence number, 0 or more>}'})
            return
        try:
            replay = await _replay(self.run, since)
        except Run.DoesNotExist:
            await self.send_json({"type": "error", "message": f"run {self.run.pk} was deleted"})
            await self.close(code=4404)
            return
        await self.send_json(replay)

    async def relay(self, text: str) -> None:
        """A live batch, '{"type": "events", "events": [...]}' as the publisher encoded it."""
        await self.send(text_data=text)
