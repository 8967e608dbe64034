"""Reads of datasets, through the one rule of who may see a row (workbench/core/ownership.py).

Every page, API call, websocket and form that shows or takes a dataset goes through here, so a
dataset someone may not see answers exactly like one that does not exist (404).
"""

from __future__ import annotations

import json

from django.db.models import Count, QuerySet
from django.shortcuts import get_object_or_404

from datasets.models import Dataset
from datasets.versions import first_version
from workbench.core.ownership import row_to_change


def datasets_visible_to(user) -> QuerySet[Dataset]:
    return Dataset.objects.select_related("owner").visible_to(user)


def dataset_for(user, pk: int) -> Dataset:
    """The dataset, or Http404 for both a missing one and someone else's."""
    return get_object_or_404(datasets_visible_to(user), pk=pk)


def dataset_to_change(user, pk: int) -> Dataset:
    """The dataset to rename, rebuild, share or delete: Http404 as dataset_for, and 403 naming
    the user's role when they may see it through a project but not change it."""
    return row_to_change(Dataset.objects.select_related("owner"), user, pk, noun="dataset")


def dataset_runs_for(dataset: Dataset, user, *, limit: int | None = None) -> list[dict]:
    """The runs that use `dataset`, newest first, as `user` may see them: a run of someone else
    (a staff member's run on this dataset, say) shows as "another user's run", with no id."""
    runs = dataset.runs.select_related("owner").order_by("-created_at")
    rows = []
    for run in runs[:limit] if limit else runs:
        if run.is_visible_to(user):
            rows.append({"id": run.pk, "name": run.name, "state": run.state})
        else:
            rows.append({"id": None, "name": "another user's run", "state": run.state})
    return rows


def dataset_labels(dataset: Dataset) -> dict:
    """A built detection or segmentation dataset's label check (label_report.json: classes with
    their counts and the class table, problems by file and line) and statistics (label_stats.json:
    instances per class, images without objects, box size and aspect histograms, objects per
    image, box centres, mask class areas); None for what the folder does not hold."""
    out = {"task": dataset.task, "check": None, "stats": None}
    for key, name in (("check", "label_report.json"), ("stats", "label_stats.json")):
        path = dataset.path / name
        if dataset.status == Dataset.Status.READY and path.is_file():
            out[key] = json.loads(path.read_text(encoding="utf-8"))
    return out


def versions_of(dataset: Dataset) -> list:
    """The dataset's versions, oldest first, each with `run_count` (runs trained on it); version 1
    (the build) is made here for a dataset built before versions existed."""
    if dataset.status == Dataset.Status.READY:
        first_version(dataset)
    return list(dataset.versions.annotate(run_count=Count("runs")).order_by("number"))


def version_of(dataset: Dataset, number: int):
    """The dataset's version `number`, or Http404."""
    return get_object_or_404(dataset.versions, number=number)
