from django.urls import reverse
from rest_framework import serializers

from workbench.runs.web.serializers import RunCreateSerializer
from workbench.searches.models import Search, Trial
from workbench.searches.selectors import best_trial, budget_words, gpu_hours_used, trial_series, trials_of
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


class TrialSerializer(serializers.ModelSerializer):
    run_state = serializers.CharField(source="run.state", default=None, allow_null=True)
    series = serializers.SerializerMethodField(
        help_text="the validation key `value` is read from: ema_<objective> when the trial keeps a weights' average"
    )

    class Meta:
        model = Trial
        fields = ["number", "state", "params", "value", "series", "rung", "reason", "run", "run_state", "created_at"]

    def get_series(self, trial: Trial) -> str:
        return trial_series(trial)


class SearchSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username")
    page = serializers.SerializerMethodField(help_text="the search's page, live")

    def get_page(self, search: Search) -> str:
        return reverse("search-detail", args=[search.pk])

    class Meta:
        model = Search
        fields = [
            "id", "name", "owner", "dataset", "network", "state", "reason", "objective", "direction", "sampler",
            "pruner", "space", "max_trials", "parallel", "gpu_hours_cap", "trials_claimed", "created_at",
            "finished_at", "page",
        ]  # fmt: skip


class SearchDetailSerializer(SearchSerializer):
    trials = serializers.SerializerMethodField()
    best = serializers.SerializerMethodField()
    budget = serializers.SerializerMethodField(help_text='"12 of 40 trials, 3.1 of 10 GPU-hours"')
    gpu_hours_used = serializers.SerializerMethodField()
    base_request = serializers.JSONField()

    class Meta(SearchSerializer.Meta):
        fields = [*SearchSerializer.Meta.fields, "base_request", "trials", "best", "budget", "gpu_hours_used"]

    def get_trials(self, search: Search) -> list[dict]:
        return TrialSerializer(trials_of(search), many=True).data

    def get_best(self, search: Search) -> dict | None:
        best = best_trial(search)
        return None if best is None else TrialSerializer(best).data

    def get_gpu_hours_used(self, search: Search) -> float:
        return round(gpu_hours_used(search), 4)

    def get_budget(self, search: Search) -> str:
        return budget_words(search)
