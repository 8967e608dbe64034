"""Reads of datasets, with the one rule of who may see one: its owner, and staff.

Every page, API call, websocket and form that shows or takes a dataset goes through here, so a
dataset someone may not see answers exactly like one that does not exist (404).
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from datasets.models import Dataset


def datasets_visible_to(user) -> QuerySet[Dataset]:
    datasets = Dataset.objects.select_related("owner")
    return datasets if user.is_staff else datasets.filter(owner=user)


def dataset_for(user, pk: int) -> Dataset:
    """The dataset, or Http404 for both a missing one and someone else's."""
    return get_object_or_404(datasets_visible_to(user), pk=pk)
