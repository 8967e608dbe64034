"""manage.py check_labels DATASET_ID [--network lenet] [--folds 5] [--epochs E] [--batch-size B]
[--gpus auto] [--dataset-version N] [--as USERNAME] [--wait [--top 20]]: starts a label check (its fold runs
queue for the workers) and prints its id; with --wait, follows the folds and prints the suspects,
the most doubtful first (split, index, given -> suggested label, confidence in the given one)."""

from __future__ import annotations

import time

from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError
from django.http import Http404

from datasets.selectors import dataset_for
from workbench.core.adapters import command_error
from workbench.core.commands import command_owner, refusal_error, require_running_workbench
from workbench.core.errors import RequestError
from workbench.labelchecks import services
from workbench.labelchecks.selectors import fold_rows, suspects_shown


class Command(BaseCommand):
    help = "Check a dataset's labels with K fold runs and confident learning; print the suspects."

    def add_arguments(self, parser):
        parser.add_argument("dataset_id", type=int)
        parser.add_argument("--network", default="lenet")
        parser.add_argument("--folds", type=int, default=5, help="2 to 10 (default 5)")
        parser.add_argument("--epochs", type=float)
        parser.add_argument("--batch-size", type=int)
        parser.add_argument("--gpus", default="auto", help="per fold run: auto | cpu | N")
        parser.add_argument("--dataset-version", type=int, help="the dataset's version to check (default: its latest)")
        parser.add_argument("--as", dest="acting", help="the user it acts for (default: the only superuser)")
        parser.add_argument("--wait", action="store_true", help="wait for the folds and print the suspects")
        parser.add_argument("--top", type=int, default=20, help="suspects to print with --wait (default 20)")

    def handle(self, *args, dataset_id, acting=None, **options):
        by = command_owner(acting, option="--as")
        config = {key: options[key] for key in ("epochs", "batch_size") if options[key] is not None}
        try:
            dataset = dataset_for(by, dataset_id)
            require_running_workbench()  # before any row exists: fold runs no worker hears would wait forever
            check = services.label_check_start(
                owner=by, dataset=dataset, network=options["network"], config=config, folds=options["folds"],
                gpus=options["gpus"], version=options["dataset_version"],
            )  # fmt: skip
        except RequestError as error:
            raise command_error(error) from None
        except Http404:
            raise CommandError(f"no dataset {dataset_id} that {by.get_username()} may see") from None
        except PermissionDenied as error:
            raise refusal_error(error) from None
        self.stdout.write(str(check.pk))
        if options["wait"]:
            self._wait(check, options["top"])

    def _wait(self, check, top: int) -> None:
        said = ""
        while not check.is_finished:
            time.sleep(2)
            check = services.label_check_refresh(check=check)
            states = ", ".join(f"fold {row['index']} {row['state']}" for row in fold_rows(check))
            if states != said:
                self.stderr.write(states)
                said = states
        if check.state != check.State.DONE:
            raise CommandError(f"label check {check.pk} {check.state}: {check.error}")
        self.stdout.write(f"{check.images} images checked, {check.suspects} suspects")
        for row in suspects_shown(check, limit=top):
            image = row["image"]
            self.stdout.write(f"{image['split']} {image['index']}: {row['given_name']} -> {row['suggested_name']} "
                              f"({row['self_confidence']:.3f} for the given label)")  # fmt: skip
