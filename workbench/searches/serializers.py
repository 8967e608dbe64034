from django.urls import reverse
from rest_framework import serializers

from workbench.runs.web.serializers import RunCreateSerializer
from workbench.searches.models import Search, Trial
from workbench.searches.selectors import (
    best_trial,
    budget_words,
    gpu_hours_used,
    latest_best_run,
    possible_actions,
    trial_series,
    trial_status,
    trial_wait_reason,
    trials_of,
)
from workbench.searches.validators import DEFAULT_PARALLEL, DEFAULT_TRIALS


class SearchCreateSerializer(RunCreateSerializer):
    """A run's fields (the base of every trial) plus the search: the space, the objective, the
    sampler and pruner, the budget. The rules are validators.py's, named by field."""

    space = serializers.DictField(
        help_text=(
            "per parameter (lr, momentum, weight_decay, optimizer, lr_policy, batch_size, network or a trainer "
            'field\'s dotted path): {"type": "loguniform"|"uniform"|"int", "low": 1e-4, "high": 0.1} or '
            '{"type": "choice", "values": [32, 64]}'
        )
    )
    objective = serializers.ChoiceField(
        choices=Search.Objective.choices,
        required=False,
        allow_null=True,
        default=None,
        help_text="one of the dataset's task's metrics; default: val_loss for a classifier, else the task's first",
    )
    direction = serializers.ChoiceField(
        choices=Search.Direction.choices, required=False, help_text="default: what the objective wants"
    )
    sampler = serializers.ChoiceField(choices=Search.Sampler.choices, default=Search.Sampler.TPE)
    pruner = serializers.ChoiceField(choices=Search.Pruner.choices, default=Search.Pruner.ASHA)
    trials = serializers.IntegerField(default=DEFAULT_TRIALS, help_text="trials in all")
    parallel = serializers.IntegerField(default=DEFAULT_PARALLEL, help_text="trials at once, at most")
    gpu_hours = serializers.FloatField(required=False, allow_null=True, default=None, help_text="a cap, or null")
    seed = serializers.IntegerField(required=False, allow_null=True, default=None, help_text="for the sampler")


def _viewer(serializer: serializers.Serializer):
    request = serializer.context.get("request")
    return None if request is None else request.user


class TrialSerializer(serializers.ModelSerializer):
    run_state = serializers.CharField(source="run.state", default=None, allow_null=True)
    status = serializers.SerializerMethodField(
        help_text="its state once it ended; while running, its run's: queued, waiting, running, paused"
    )
    wait_reason = serializers.SerializerMethodField(help_text="why its run waits in the queue; empty otherwise")
    series = serializers.SerializerMethodField(
        help_text="the validation key `value` is read from: ema_<objective> when the trial keeps a weights' average"
    )

    class Meta:
        model = Trial
        fields = [
            "number", "state", "status", "wait_reason", "params", "value", "series", "rung", "reason", "run",
            "run_state", "created_at",
        ]  # fmt: skip

    def get_series(self, trial: Trial) -> str:
        return trial_series(trial)

    def get_status(self, trial: Trial) -> str:
        return trial_status(trial)

    def get_wait_reason(self, trial: Trial) -> str:
        return trial_wait_reason(trial, _viewer(self))


class BestRunSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="run.pk")
    state = serializers.CharField(source="run.state")
    trial = serializers.IntegerField(source="trial_number")
    epochs = serializers.FloatField()


class SearchSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username")
    project = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True, help_text="its project's slug, or null"
    )
    page = serializers.SerializerMethodField(help_text="the search's page, live")

    def get_page(self, search: Search) -> str:
        return reverse("search-detail", args=[search.pk])

    class Meta:
        model = Search
        fields = [
            "id", "name", "owner", "project", "dataset", "network", "state", "reason", "objective", "direction",
            "sampler", "pruner", "space", "max_trials", "parallel", "gpu_hours_cap", "trials_claimed", "created_at",
            "finished_at", "page",
        ]  # fmt: skip


class SearchDetailSerializer(SearchSerializer):
    trials = serializers.SerializerMethodField()
    best = serializers.SerializerMethodField()
    budget = serializers.SerializerMethodField(help_text='"12 of 40 trials, 3.1 of 10 GPU-hours"')
    gpu_hours_used = serializers.SerializerMethodField()
    base_request = serializers.JSONField()
    actions = serializers.SerializerMethodField(help_text="which of pause, resume, abort, train-best it takes now")
    best_run = serializers.SerializerMethodField(help_text="the full run Train the best queued last, or null")

    class Meta(SearchSerializer.Meta):
        fields = [
            *SearchSerializer.Meta.fields, "base_request", "trials", "best", "budget", "gpu_hours_used", "actions",
            "best_run",
        ]  # fmt: skip

    def get_trials(self, search: Search) -> list[dict]:
        return TrialSerializer(trials_of(search), many=True, context=self.context).data

    def get_best(self, search: Search) -> dict | None:
        best = best_trial(search)
        return None if best is None else TrialSerializer(best, context=self.context).data

    def get_actions(self, search: Search) -> dict[str, bool]:
        return possible_actions(search)

    def get_best_run(self, search: Search) -> dict | None:
        latest = latest_best_run(search)
        return None if latest is None else BestRunSerializer(latest).data

    def get_gpu_hours_used(self, search: Search) -> float:
        return round(gpu_hours_used(search), 4)

    def get_budget(self, search: Search) -> str:
        return budget_words(search)
