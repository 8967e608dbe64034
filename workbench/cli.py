"""The door every `manage.py` command goes through (manage.py calls `execute`): a command run
against a database that is not migrated says so in one line naming what to run, instead of
Django's 40-line "no such table" traceback.

Asked after the failure, not before every command: a check up front would cost each command a
look at the migrations and a list of the commands that need none (migrate, help, check...);
a command that never touches a missing table has nothing to say about it."""

from __future__ import annotations

import sys

from django.core.management import execute_from_command_line
from django.db import DatabaseError, connection, connections
from django.db.migrations.executor import MigrationExecutor


def unmigrated_line() -> str | None:
    """The one line saying the database lacks migrations, or None when it lacks none (or cannot
    be asked: then the command's own error is the better one)."""
    try:
        connections.close_all()  # a failed statement may have left a transaction half done
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError:
        return None
    if not plan:
        return None
    where = connection.settings_dict["NAME"]
    return (
        f"the database {where} is not set up for this workbench ({len(plan)} migrations not applied): "
        "run `manage.py migrate` with the same WORKBENCH_DATA_DIR (or DATABASE_URL), "
        "or start the workbench there with `make run` (manage.py runworkbench), which applies them"
    )


def execute(argv: list[str]) -> None:
    try:
        execute_from_command_line(argv)
    except DatabaseError:
        # migrate's own failure is its own: telling it to run migrate would send it in a circle.
        line = None if argv[1:2] == ["migrate"] else unmigrated_line()
        if line is None:
            raise
        sys.exit(line)  # the line on stderr, exit status 1, as settings' NoWorkbenchData
