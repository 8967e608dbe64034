"""manage.py versions DATASET_ID [--as USERNAME] [--fixes FILE.json [--from N] [--note TEXT] |
--drop-leaked-copies | --delete N]: lists a dataset's versions (number, digest, images per split,
runs, note), or makes one (from a JSON list of fixes, as the API takes them, or by dropping the
training split's copies of validation and test images that the duplicates report lists), or
deletes one no run trained on."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError
from django.http import Http404

from datasets.selectors import dataset_for, dataset_to_change, versions_of
from datasets.services import VersionInUse, version_create, version_delete, version_drop_leaks
from workbench.core.adapters import command_error
from workbench.core.commands import command_owner, refusal_error
from workbench.core.errors import RequestError


class Command(BaseCommand):
    help = "List a dataset's versions, make one from fixes or without its leaked copies, or delete one."

    def add_arguments(self, parser):
        parser.add_argument("dataset_id", type=int)
        parser.add_argument("--as", dest="acting", help="the user it acts for (default: the only superuser)")
        what = parser.add_mutually_exclusive_group()
        what.add_argument("--fixes", type=Path, help="a JSON file: a list of {op, split, index[, label | to]}")
        what.add_argument("--drop-leaked-copies", action="store_true", help="drop the training split's leaked copies")
        what.add_argument("--delete", type=int, metavar="N", help="delete version N (no run may use it)")
        parser.add_argument("--from", dest="base", type=int, help="the version fixed (default: the latest)")
        parser.add_argument("--note", default="", help="a note kept with the new version")

    def handle(self, *args, dataset_id, acting=None, **options):
        by = command_owner(acting, option="--as")
        changes = options["fixes"] or options["drop_leaked_copies"] or options["delete"] is not None
        try:
            dataset = (dataset_to_change if changes else dataset_for)(by, dataset_id)
            if options["fixes"]:
                version = version_create(
                    dataset=dataset, by=by, fixes=self._fixes(options["fixes"]), note=options["note"],
                    base=self._base(dataset, options["base"]),
                )  # fmt: skip
            elif options["drop_leaked_copies"]:
                version = version_drop_leaks(dataset=dataset, by=by)
            elif options["delete"] is not None:
                version_delete(dataset=dataset, version=self._version(dataset, options["delete"]), by=by)
                self.stdout.write(f"deleted version {options['delete']}")
                return
            else:
                for row in versions_of(dataset):
                    self.stdout.write(self._line(row, row.run_count))
                return
        except RequestError as error:
            raise command_error(error) from None
        except VersionInUse as error:
            raise CommandError(str(error)) from None
        except Http404:
            raise CommandError(f"no dataset {dataset_id} that {by.get_username()} may see") from None
        except PermissionDenied as error:
            raise refusal_error(error) from None
        self.stdout.write(self._line(version, 0))

    @staticmethod
    def _line(version, runs: int) -> str:
        splits = ", ".join(f"{split} {row.get('count', 0)}" for split, row in (version.splits or {}).items())
        used = f"{runs} run" + ("" if runs == 1 else "s")
        return f"v{version.number}  {version.digest}  {splits}  {used}  {version.note}".rstrip()

    @staticmethod
    def _fixes(path: Path):
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise CommandError(f"--fixes {path.name}: {error}") from None

    @staticmethod
    def _version(dataset, number: int):
        version = dataset.versions.filter(number=number).first()
        if version is None:
            raise CommandError(f"dataset {dataset.pk} has no version {number}")
        return version

    def _base(self, dataset, number: int | None):
        return None if number is None else self._version(dataset, number)
