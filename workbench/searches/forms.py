"""The search part of the new-run page: the space (one parameter a line, in the command line's
--param words), the objective, the sampler and pruner, the budget. Posted with the run's own
fields (the base of every trial, RunForm's) under the prefix "search"; the rules are
validators.py's and the service's, shared with the API and `manage.py search`."""

from __future__ import annotations

import json

from django import forms

from trainer.protocol import TASK_METRICS
from workbench.core.errors import RequestError
from workbench.runs.templatetags.numbers import METRIC_NAMES
from workbench.searches.models import Search
from workbench.searches.validators import DEFAULT_PARALLEL, DEFAULT_TRIALS, MAX_TRIALS, parse_param

PARAMS_EXAMPLE = "lr=loguniform:1e-4:1e-1\nbatch_size=choice:32,64"


class SearchForm(forms.Form):
    prefix = "search"
    # Its card shares the page's <form> with "Create run", which must not wait on these fields.
    use_required_attribute = False

    params = forms.CharField(
        label="Parameters",
        required=False,  # said by clean_params, with an example
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": PARAMS_EXAMPLE, "spellcheck": "false"}),
        help_text=(
            "One a line, as manage.py search --param: NAME=loguniform:LOW:HIGH, uniform:LOW:HIGH, int:LOW:HIGH or "
            "choice:A,B,C. NAME is lr, momentum, weight_decay, optimizer, lr_policy, batch_size, network or a "
            "trainer field's dotted path. The fields above are the base of every trial."
        ),
    )
    # In the pages' words (mIoU, mAP50: Django's own labels read "Miou", "Map 50"); the page
    # offers only the chosen dataset's task's, which the select carries (TASK_METRICS).
    objective = forms.ChoiceField(
        choices=[("", "the task's own (val. loss for a classifier)")]
        + [(name, METRIC_NAMES.get(name, name)) for name in Search.Objective.values],
        required=False,
        help_text="What the trials are judged by, at each epoch (a rung).",
        widget=forms.Select(attrs={"data-task-metrics": json.dumps(TASK_METRICS)}),
    )
    sampler = forms.ChoiceField(
        choices=Search.Sampler.choices, initial=Search.Sampler.TPE, help_text="How the next trial is drawn."
    )
    pruner = forms.ChoiceField(
        choices=Search.Pruner.choices,
        initial=Search.Pruner.ASHA,
        help_text="Which trials stop early: ASHA keeps the best third at each rung.",
    )
    trials = forms.IntegerField(min_value=1, max_value=MAX_TRIALS, initial=DEFAULT_TRIALS, label="Trials in all")
    parallel = forms.IntegerField(min_value=1, initial=DEFAULT_PARALLEL, label="Trials at once")
    gpu_hours = forms.FloatField(
        required=False, min_value=0.0, label="GPU-hours cap", help_text="Empty: no cap; the trials stop there."
    )

    def clean_params(self) -> dict:
        space: dict = {}
        for number, line in enumerate(self.cleaned_data["params"].splitlines(), start=1):
            if not line.strip():
                continue
            try:
                name, spec = parse_param(line.strip())
            except RequestError as error:
                raise forms.ValidationError(f"line {number}: {error.message}") from None
            if name in space:
                raise forms.ValidationError(f"line {number}: {name} is given twice")
            space[name] = spec
        if not space:
            raise forms.ValidationError(f"Name at least one parameter, e.g. {PARAMS_EXAMPLE.splitlines()[0]}")
        return space

    def search_request(self) -> dict:
        """The search's own arguments of services.search_create."""
        data = self.cleaned_data
        return {
            "space": data["params"],
            "objective": data["objective"] or None,
            "sampler": data["sampler"],
            "pruner": data["pruner"],
            "trials": data["trials"],
            "parallel": data["parallel"],
            "gpu_hours": data["gpu_hours"],
        }

    def add_request_error(self, error: RequestError) -> bool:
        """A refusal of the search's own fields as this form's errors ("space.lr" is the params
        box's); False when none of its fields was named (a run field: RunForm shows it)."""
        named = False
        for field, message in error.errors:
            name = "params" if (field or "").startswith("space") else field
            if name in self.fields:
                shown = (
                    f"{field.removeprefix('space.')}: {message}" if name == "params" and field != "space" else message
                )
                self.add_error(name, shown)
                named = True
        return named
