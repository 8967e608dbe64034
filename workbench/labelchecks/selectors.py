"""Reads of label checks through the one rule of who may see a row (core/ownership.py); a
check's state is brought up to date with its fold runs as it is read (services.label_check_refresh)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from datasets.doctor.report import with_thumbnails
from workbench.core.ownership import row_to_change
from workbench.labelchecks.folds import read_report
from workbench.labelchecks.models import LabelCheck


def label_checks_visible_to(user) -> QuerySet[LabelCheck]:
    return LabelCheck.objects.select_related("owner", "dataset", "version").visible_to(user)


def label_check_for(user, pk: int) -> LabelCheck:
    return get_object_or_404(label_checks_visible_to(user), pk=pk)


def label_check_to_change(user, pk: int) -> LabelCheck:
    return row_to_change(LabelCheck.objects.select_related("owner", "dataset", "version"), user, pk, noun="label check")


def fold_rows(check: LabelCheck) -> list[dict]:
    return [
        {
            "index": fold.index + 1,
            "run": fold.run_id,
            "state": fold.run.state if fold.run else "deleted",
            "images": len(fold.places),
        }  # fmt: skip
        for fold in check.fold_runs.select_related("run").order_by("index")
    ]


def suspects_shown(check: LabelCheck, *, limit: int = 48, with_pictures: bool = False) -> list[dict]:
    report = read_report(check) if check.state == LabelCheck.State.DONE else None
    rows = (report or {}).get("suspects", [])[:limit]
    return with_thumbnails(check.dataset.path, rows, sides=("image",)) if with_pictures and rows else rows
