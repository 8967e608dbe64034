"""`manage.py train`: queue a training run from the command line, optionally wait for it."""

from __future__ import annotations

import json
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from datasets.models import Dataset
from trainer.config import ALL_NETWORKS, OPTIMIZERS, SHORT_FIELDS, default_of, plain_number, shown, with_setting
from trainer.recipes import PRESETS
from workbench.core.adapters import command_error
from workbench.core.commands import command_owner, require_running_workbench
from workbench.core.errors import RequestError
from workbench.core.ids import parse_id
from workbench.runs.models import Run
from workbench.runs.services import DATASETS_PROJECT, run_submit
from workbench.runs.validators import check_priority
from workbench.weights.files import WeightsError
from workbench.weights.uploads import weights_upload

# The options that are short fields (trainer.config.SHORT_FIELDS says where each goes).
SHORT_OPTIONS = ("epochs", "batch_size", "preset", "lr", "solver")


class Command(BaseCommand):
    help = "Queue a training run; prints its id. With --wait, prints progress and exits 0 only if it ends done."

    def add_arguments(self, parser):
        parser.add_argument("--dataset", type=int, required=True, help="dataset id")
        parser.add_argument("--network", required=True, choices=ALL_NETWORKS)
        parser.add_argument(
            "--dataset-version", type=int, help="the dataset's version to train on (default: its latest)"
        )
        parser.add_argument("--epochs", type=float, help=f"default {plain_number(default_of('epochs'))}")
        parser.add_argument("--batch-size", type=int, help=f"global batch size (default {default_of('batch_size')})")
        parser.add_argument(
            "--gpus", default="auto", help="auto | cpu | N | HOST:0,1 (default auto); per node on Slurm"
        )
        parser.add_argument("--executor", choices=("local", "slurm"), help="where it runs (default local)")
        parser.add_argument("--nodes", type=int, default=1, help="nodes to span (Slurm only; default 1)")
        parser.add_argument(
            "--lr", type=float, help=f"base learning rate (default {plain_number(default_of('solver.base_lr'))})"
        )
        parser.add_argument("--solver", choices=OPTIMIZERS)
        parser.add_argument(
            "--preset", choices=tuple(PRESETS), help="a recipe (trainer/recipes.py) filling what is not given"
        )
        parser.add_argument("--name", default="")
        parser.add_argument("--priority", type=int, default=0, help="-100 to 100, higher first (default 0)")
        parser.add_argument(
            "--project", help="the project it goes into (a slug; '' for none); default: its dataset's, for a member"
        )
        parser.add_argument("--config", type=Path, help="a JSON file of further trainer settings (docs/formats.md)")
        parser.add_argument(
            "--pretrained", help="weights to start from: upload:<id>, run:<id> or run:<id>:last, as the owner may use"
        )
        parser.add_argument(
            "--pretrained-file",
            type=Path,
            help="a state_dict file to start from, stored first as an upload of the owner (as POST /api/pretrained/)",
        )
        parser.add_argument(
            "--weights",
            type=int,
            metavar="ID",
            help="start from the weights store's weights:<id> (manage.py weights list)",
        )
        parser.add_argument(
            "--freeze-backbone-epochs", type=float, help="fine-tuning: epochs the loaded layers stay frozen (default 0)"
        )
        parser.add_argument(
            "--backbone-lr-mult", type=float, help="fine-tuning: the backbone's rate multiplier (default 1)"
        )
        parser.add_argument("--freeze-bn", action="store_true", help="fine-tuning: keep BatchNorm in eval mode")
        parser.add_argument("--owner", help="username of the owner (default: the dataset's owner)")
        parser.add_argument("--wait", action="store_true", help="wait for the run to end, printing progress")

    def handle(self, *args, **options):
        pk = parse_id(options["dataset"])
        dataset = Dataset.objects.filter(pk=pk).first() if pk else None
        if dataset is None:
            raise CommandError(f"no dataset with id {shown(options['dataset'])}")
        try:
            # The rule of the form and the API; whoever runs manage.py on the server sets it as staff.
            priority = check_priority(options["priority"], by_staff=True)
        except RequestError as error:
            raise command_error(error) from None
        owner = command_owner(options["owner"], default=dataset.owner)
        if not dataset.is_visible_to(owner):
            raise CommandError(f"dataset {dataset.pk} does not belong to {owner.username}")
        config = self._config(options)
        require_running_workbench()  # before any row exists: a run no worker hears would wait forever
        if options["pretrained_file"]:
            config["pretrained"] = self._upload(owner, options["pretrained_file"])
        try:
            run = run_submit(
                owner=owner,
                dataset=dataset,
                name=options["name"],
                network=options["network"],
                config=config,
                gpus=options["gpus"],
                priority=priority,
                executor=options["executor"],
                nodes=options["nodes"],
                project=DATASETS_PROJECT if options["project"] is None else options["project"],
                dataset_version=options["dataset_version"],
            )
        except RequestError as error:
            raise command_error(error) from None
        self.stdout.write(str(run.pk))
        if options["wait"]:
            self._wait(run)

    def _config(self, options) -> dict:
        config: dict = {}
        if options["config"]:
            try:
                config = json.loads(options["config"].read_text())
            except (OSError, json.JSONDecodeError) as error:
                raise CommandError(f"--config {options['config']}: {error}") from None
            if not isinstance(config, dict):
                raise CommandError(f"--config {options['config']}: expected a JSON object of trainer settings")
        # What is not given is the trainer's default (trainer/config.py), as for the API and the form.
        for name in SHORT_OPTIONS:
            if options[name] not in (None, ""):
                config = with_setting(config, SHORT_FIELDS[name], options[name])
        if options["pretrained"] and options["weights"] is not None:
            raise CommandError("give --pretrained or --weights, not both")
        if options["pretrained"]:
            config["pretrained"] = options["pretrained"]
        if options["weights"] is not None:
            config["pretrained"] = f"weights:{options['weights']}"
        for name in ("freeze_backbone_epochs", "backbone_lr_mult"):
            if options[name] is not None:
                config[name] = options[name]
        if options["freeze_bn"]:
            config["freeze_bn"] = True
        return config

    def _upload(self, owner, path: Path) -> str:
        try:
            with path.open("rb") as handle:
                weights = weights_upload(owner=owner, name=path.name, chunks=handle, size=path.stat().st_size)
        except OSError as error:
            raise CommandError(f"--pretrained-file {path}: {error.strerror}") from None
        except WeightsError as error:
            raise CommandError(f"--pretrained-file: {error}") from None
        self.stderr.write(f"stored {path.name} as {weights.reference}")
        return weights.reference

    def _wait(self, run: Run) -> None:
        last_line = ""
        while True:
            run.refresh_from_db()
            line = f"run {run.pk}: {run.state}"
            if run.state == Run.State.RUNNING:
                eta = f", ETA {run.eta_seconds:.0f} s" if run.eta_seconds is not None else ""
                line += f" {100 * run.progress:.0f}%{eta}"
            elif run.state in Run.PENDING_STATES and run.wait_reason:
                line += f" ({run.wait_reason_for(run.owner)})"
            elif run.state == Run.State.DONE:
                # The trainer's last words: "finished 60 steps (3.00 epochs), val top-1 0.9709".
                line += f" — {run.transitions.last().reason}"
            if line != last_line:
                self.stdout.write(line)
                last_line = line
            if run.state in Run.FINISHED_STATES:
                break
            time.sleep(1.0)
        if run.state != Run.State.DONE:
            raise CommandError(f"run {run.pk} ended {run.state}: {run.error or run.transitions.last().reason}")
