"""Channel-layer groups: their names, in one place, and a publish that never breaks the caller.

Live delivery is best effort everywhere: whatever is published is also stored, and a client that
missed a message replays it (runs) or reads the row again (datasets, the dashboard).
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

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
