"""What the database holds, table by table: for tests that something writes nothing."""

from __future__ import annotations

from django.apps import apps


def row_counts() -> dict[str, int]:
    """The row count of every table of every installed model."""
    return {model._meta.db_table: model._base_manager.count() for model in apps.get_models()}
