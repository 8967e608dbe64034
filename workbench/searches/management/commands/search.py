"""`manage.py search`: start a hyperparameter search from the command line (the run's own fields
as for `manage.py train`, plus the space, the strategy and the budget); optionally wait for it."""

from __future__ import annotations

import json
import time

from django.core.management.base import CommandError

from datasets.models import Dataset
from trainer.config import shown
from workbench.core.adapters import command_error
from workbench.core.commands import command_owner, require_running_workbench
from workbench.core.errors import RequestError
from workbench.core.ids import parse_id
from workbench.runs.management.commands.train import Command as TrainCommand
from workbench.runs.validators import check_priority
from workbench.searches.models import Search, Trial
from workbench.searches.selectors import (
    best_trial,
    budget_words,
    trial_status,
    trial_wait_reason,
    trials_of,
    value_is_averaged,
)
from workbench.searches.serializers import SearchDetailSerializer
from workbench.searches.services import search_create
from workbench.searches.validators import DEFAULT_PARALLEL, DEFAULT_TRIALS, parse_param


class Command(TrainCommand):
    help = (
        "Start a search: trials of a run over --param spaces, each queued as a run; prints its id (or, with "
        "--wait, its trials until it ends, exiting 0 only if it ends done with a best)."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)  # the run's own fields, as for `manage.py train`
        parser.add_argument(
            "--param", action="append", default=[], metavar="NAME=TYPE:...",
            help="a dimension of the space, repeatable: lr=loguniform:1e-4:1e-1, momentum=uniform:0.8:0.99, "
            "epochs=int:1:4, batch_size=choice:32,64 (names: lr, momentum, weight_decay, optimizer, lr_policy, "
            "batch_size, network, or a trainer field's dotted path)",
        )  # fmt: skip
        parser.add_argument(
            "--trials", type=int, default=DEFAULT_TRIALS, help=f"trials in all (default {DEFAULT_TRIALS})"
        )
        parser.add_argument(
            "--parallel",
            type=int,
            default=DEFAULT_PARALLEL,
            help=f"trials at once, at most (default {DEFAULT_PARALLEL})",
        )
        parser.add_argument("--gpu-hours", type=float, help="a cap on the GPU-hours the trials spend")
        parser.add_argument("--sampler", choices=Search.Sampler.values, default="tpe")
        parser.add_argument("--pruner", choices=Search.Pruner.values, default="asha")
        parser.add_argument(
            "--objective",
            choices=Search.Objective.values,
            help="default: val_loss for a classifier, else the task's first",
        )
        parser.add_argument("--direction", choices=Search.Direction.values, help="default: what the objective wants")
        parser.add_argument("--seed", type=int, help="the sampler's seed")
        parser.add_argument("--format", choices=("table", "json"), default="table", help="how --wait prints")

    def handle(self, *args, **options):
        pk = parse_id(options["dataset"])
        dataset = Dataset.objects.filter(pk=pk).first() if pk else None
        if dataset is None:
            raise CommandError(f"no dataset with id {shown(options['dataset'])}")
        owner = command_owner(options["owner"], default=dataset.owner)
        if not dataset.is_visible_to(owner):
            raise CommandError(f"dataset {dataset.pk} does not belong to {owner.username}")
        try:
            priority = check_priority(options["priority"], by_staff=True)
            space = dict(parse_param(text) for text in options["param"])
        except RequestError as error:
            raise command_error(error) from None
        config = self._config(options)
        require_running_workbench()  # before any row exists: a search no worker hears would wait forever
        if options["pretrained_file"]:
            config["pretrained"] = self._upload(owner, options["pretrained_file"])
        try:
            search = search_create(
                owner=owner, dataset=dataset, name=options["name"], network=options["network"], config=config,
                space=space, gpus=options["gpus"], priority=priority, executor=options["executor"],
                nodes=options["nodes"], objective=options["objective"], direction=options["direction"],
                sampler=options["sampler"], pruner=options["pruner"], trials=options["trials"],
                parallel=options["parallel"], gpu_hours=options["gpu_hours"], seed=options["seed"],
            )  # fmt: skip
        except RequestError as error:
            raise command_error(error) from None
        if not options["wait"]:
            self.stdout.write(str(search.pk))
            return
        self._wait_for_search(search, as_json=options["format"] == "json")

    def _wait_for_search(self, search: Search, *, as_json: bool) -> None:
        shown_text = ""
        while True:
            search.refresh_from_db()
            text = "" if as_json else search_table(search)
            if text != shown_text:
                self.stdout.write(text)
                shown_text = text
            if search.is_finished:
                break
            time.sleep(1.0)
        if as_json:
            self.stdout.write(json.dumps(SearchDetailSerializer(search).data, indent=2, default=str))
        if search.state != Search.State.DONE or best_trial(search) is None:
            raise CommandError(f"search {search.pk} ended {search.state} without a best: {search.reason}")


def averaged_mark(trial: Trial) -> str:
    """ " (EMA)" after a value that is the weights' average's, as the search page marks it."""
    return " (EMA)" if value_is_averaged(trial) else ""


def search_table(search: Search) -> str:
    """The search in a few lines: its state and budget, one line per trial, the best."""
    lines = [f"search {search.pk} ({search.name}): {search.state}, {budget_words(search)}"]
    lines.append(f"{'trial':>5}  {'state':<9} {'run':>5} {'rung':>4}  {search.objective:>9}  parameters")
    for trial in trials_of(search):
        value = "" if trial.value is None else f"{trial.value:.4g}" + averaged_mark(trial)
        params = ", ".join(
            f"{name}={chosen!r}" if isinstance(chosen, str) else f"{name}={chosen:g}"
            for name, chosen in trial.params.items()
        )
        # A running trial says what its run does (queued, and why, until it runs), as the page does.
        waits = trial_wait_reason(trial, search.owner)
        why = f"waiting: {waits}" if waits else trial.reason
        lines.append(
            f"{trial.number:>5}  {trial_status(trial):<9} {trial.run_id or '':>5} {trial.rung or '':>4}  {value:>9}  "
            f"{params}" + (f"  ({why})" if why else "")
        )
    best = best_trial(search)
    if best is not None:
        lines.append(f"best: trial {best.number}, {search.objective} {best.value:.4g}{averaged_mark(best)}")
    if search.reason:
        lines.append(search.reason)
    return "\n".join(lines)
