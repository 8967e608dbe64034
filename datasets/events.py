"""What a dataset tells the browser: its owner's dashboard and its own page (best effort)."""

from __future__ import annotations

from datasets.models import Dataset
from workbench.core.groups import group_publish, user_group_name


def publish(dataset: Dataset) -> None:
    """Tell the owner's dashboard and the dataset's page; a missing channel layer must never break a build."""
    summary = {
        "kind": "dataset",
        "id": dataset.pk,
        "status": dataset.status,
        "percent": round(dataset.progress_percent, 1),
    }
    group_publish(user_group_name(dataset.owner_id), {"type": "dashboard.update", "payload": summary})
    # The dataset page's own socket gets counts, speed and ETA.
    group_publish(dataset.progress_group_name, {"type": "dataset.progress", "payload": dataset.progress_payload()})
