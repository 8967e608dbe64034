"""One rule for whom a `manage.py` command acts (workbench/core/commands.py: command_owner): --owner,
else the dataset's owner where the command works on a dataset, else the only superuser."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from tests.conftest import PASSWORD
from workbench.benchmarks.models import Benchmark

pytestmark = pytest.mark.django_db

# Each command stops at its owner, before it reads its source or queues anything.
COMMANDS = [("benchmark", "--gpus", "1"), ("import_dataset", "no-such-source")]


def test_it_takes_the_only_superuser_as_the_owner_of_a_benchmark_as_of_an_import(django_user_model, capsys):
    admin = django_user_model.objects.create_superuser("admin", "admin@example.com", PASSWORD)
    call_command("benchmark", "--gpus", "1")
    assert Benchmark.objects.get().owner == admin


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
def test_it_refuses_alike_in_every_command_without_one_owner(django_user_model, command):
    for name in ("admin", "root"):
        django_user_model.objects.create_superuser(name, f"{name}@example.com", PASSWORD)
    with pytest.raises(CommandError, match=r"^give --owner USERNAME \(there is not exactly one superuser"):
        call_command(*command)
    with pytest.raises(CommandError, match=r"^--owner: no user named 'nobody'$"):
        call_command(*command, "--owner", "nobody")
