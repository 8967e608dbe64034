"""Rows a test needs but whose details it does not care about, made in one place.

A test names only the fields it relies on; the rest are the model's own defaults, so a field the
model gains later is added here once, not in every test that needs a row. For a dataset with its
images on disk, use the `make_dataset` fixture (tests/workbench/runs/conftest.py), built on this.
"""

from __future__ import annotations

from datasets.models import Dataset
from trainer.protocol import TASKS


def make_dataset_row(
    owner, *, name: str = "bars", status: str = Dataset.Status.READY, task: str = TASKS[0], **fields
) -> Dataset:
    """A dataset row of `owner`'s, ready by default, with no folder on disk.

    Ready is what most tests need (something to start a run on); a test that must keep its runs
    from starting passes `status=Dataset.Status.BUILDING` (the scheduler never starts those).
    """
    return Dataset.objects.create(owner=owner, name=name, status=status, task=task, **fields)
