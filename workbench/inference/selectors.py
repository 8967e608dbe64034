"""Reads of inference jobs, through the one rule of who may see a row (workbench/core/ownership.py)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from workbench.inference.models import InferenceJob


def jobs_visible_to(user) -> QuerySet[InferenceJob]:
    return InferenceJob.objects.select_related("run", "owner").visible_to(user)


def job_for(user, pk: int) -> InferenceJob:
    """The job, or Http404 for both a missing one and someone else's."""
    return get_object_or_404(jobs_visible_to(user), pk=pk)
