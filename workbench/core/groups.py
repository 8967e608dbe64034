"""Channel-layer groups: their names, in one place, and a publish that never breaks the caller.

Live delivery is best effort everywhere: whatever is published is also stored, and a client that
missed a message replays it (runs) or reads the row again (datasets, the dashboard).
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

log = logging.getLogger(__name__)


def user_group_name(user_id: int) -> str:
    """The owner's dashboard socket (/ws/dashboard/): status and progress of their datasets and runs."""
    return f"user-{user_id}"


def run_group_name(run_id: int) -> str:
    """A run page's socket (/ws/runs/<id>/), on the live channel layer."""
    return f"run-{run_id}"


def dataset_group_name(dataset_id: int) -> str:
    """A dataset page's socket (/ws/datasets/<id>/): a build's counts, speed and ETA."""
    return f"dataset-{dataset_id}"


def benchmark_group_name(benchmark_id: int) -> str:
    """A benchmark page's socket (/ws/benchmarks/<id>/): its cells as they are measured."""
    return f"benchmark-{benchmark_id}"


def search_group_name(search_id: int) -> str:
    """A search page's socket (/ws/searches/<id>/): a ping whenever its trials or state change."""
    return f"search-{search_id}"


def group_publish(group: str, message: dict, *, alias: str = "default") -> None:
    layer = get_channel_layer(alias)
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:
        log.warning("could not publish to %s", group, exc_info=True)


def access_group_name(user_id: int) -> str:
    """Every object socket of a user (run, dataset, search, benchmark pages): told when what the
    user may see has shrunk (removed from a project), so each reads its row again and closes."""
    return f"access-{user_id}"


ACCESS_CHANGED = "access.changed"


def publish_access_changed(user_id: int) -> None:
    """On both layers: the run sockets listen on the live layer's fan-out, the others on the default."""
    message = {"type": ACCESS_CHANGED, "text": '{"type": "access"}'}
    group_publish(access_group_name(user_id), message)
    if settings.LIVE_CHANNEL_LAYER != "default":
        group_publish(access_group_name(user_id), message, alias=settings.LIVE_CHANNEL_LAYER)
