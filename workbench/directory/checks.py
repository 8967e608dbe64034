"""`manage.py check` (and every start) refuses a group mapping it cannot read, naming the entry."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register

from workbench.directory.mapping import parse_group_map


@register()
def group_map_reads(app_configs, **kwargs) -> list[Error]:
    try:
        parse_group_map(settings.DIRECTORY_GROUPS)
    except ValueError as error:
        return [Error(f"WORKBENCH_DIRECTORY_GROUPS: {error}", id="directory.E001")]
    return []
