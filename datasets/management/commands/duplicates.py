"""manage.py duplicates DATASET_ID [--as USERNAME] [--pairs N]: checks a dataset for duplicates
and leaks between splits in this process, writes the report its page and the API show, and
prints it: counts per pair of splits, then the first N pairs (leaks first)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError
from django.http import Http404

from datasets.selectors import dataset_for
from datasets.services import duplicates_check_now
from workbench.core.adapters import command_error
from workbench.core.commands import command_owner, refusal_error
from workbench.core.errors import RequestError


class Command(BaseCommand):
    help = "Check a dataset for exact and near duplicates, within and across its splits (leaks)."

    def add_arguments(self, parser):
        parser.add_argument("dataset_id", type=int)
        parser.add_argument("--as", dest="acting", help="the user it acts for (default: the only superuser)")
        parser.add_argument("--pairs", type=int, default=20, help="pairs to print (default 20)")

    def handle(self, *args, dataset_id, acting=None, pairs=20, **options):
        by = command_owner(acting, option="--as")
        try:
            report = duplicates_check_now(dataset=dataset_for(by, dataset_id), by=by)
        except RequestError as error:
            raise command_error(error) from None
        except Http404:
            raise CommandError(f"no dataset {dataset_id} that {by.get_username()} may see") from None
        except PermissionDenied as error:
            raise refusal_error(error) from None
        if "error" in report:
            raise command_error(RequestError("dataset", report["error"]))
        counts = ", ".join(f"{where}: {count}" for where, count in report["counts"].items()) or "none"
        found = f"{report['pairs_total']} pairs of copies ({report['exact']} exact), {report['leaks']} across splits"
        self.stdout.write(f"{report['images']} images, {found}; per split pair: {counts}")
        for row in report["pairs"][:pairs]:
            a, b = row["a"], row["b"]
            self.stdout.write(f"{row['kind']:5} {a['split']} {a['key']} (label {a['label']}) ~ "
                              f"{b['split']} {b['key']} (label {b['label']})")  # fmt: skip
