"""Reads of runs, with the one rule of who may see one: its owner, and staff.

Every page, API call, websocket and form that shows or takes a run goes through here, so a run
someone may not see answers exactly like one that does not exist (404).
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from workbench.runs.models import Run


def runs_visible_to(user) -> QuerySet[Run]:
    return Run.objects.select_related("owner", "dataset", "host").visible_to(user)


def run_for(user, pk: int) -> Run:
    """The run, or Http404 for both a missing one and someone else's."""
    return get_object_or_404(runs_visible_to(user), pk=pk)
