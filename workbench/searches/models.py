"""A hyperparameter search: an Optuna study over runs of one base request, and its trials.

The study itself (its trials' parameters, intermediate values, states) lives in Optuna's RDB
storage on the workbench's own database (studies.py); these rows are what the workbench needs
beside it: who owns the search, what a trial run is asked for, the budget, and which run is
which trial.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from workbench.core.groups import search_group_name
from workbench.core.ownership import OwnedModel
from workbench.runs.models import Run


class Search(OwnedModel):
    class State(models.TextChoices):
        RUNNING = "running"  # asks for trials and runs them, up to `parallel` at once
        PAUSED = "paused"  # its trials are paused; no new trial starts
        DONE = "done"  # its budget is spent and its last trial ended
        ABORTED = "aborted"

    # Named as their authors name them (Django's own labels read "Tpe", "Cmaes").
    class Sampler(models.TextChoices):
        TPE = "tpe", "TPE"
        RANDOM = "random", "random"
        GRID = "grid", "grid"
        CMAES = "cmaes", "CMA-ES"

    class Pruner(models.TextChoices):
        ASHA = "asha", "ASHA"  # asynchronous successive halving
        HYPERBAND = "hyperband", "Hyperband"
        MEDIAN = "median", "Median"
        NONE = "none", "no"  # "no pruner"

    class Objective(models.TextChoices):
        # Every task's validation metric (trainer/protocol.py TASK_METRICS); the dataset's task
        # decides which ones a search may use (validators.validate_strategy).
        VAL_LOSS = "val_loss"
        TOP1 = "top1"
        TOP5 = "top5"
        MAP = "map"
        MAP_50 = "map_50"
        MAP_75 = "map_75"
        MAR_100 = "mar_100"
        MIOU = "miou"
        PIXEL_ACCURACY = "pixel_accuracy"
        DICE = "dice"

    class Direction(models.TextChoices):
        MINIMIZE = "minimize"
        MAXIMIZE = "maximize"

    FINISHED_STATES = (State.DONE, State.ABORTED)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="searches")
    # The project it is shared with (docs/design.md, "Projects and roles"); null: its owner's alone.
    project = models.ForeignKey(
        "projects.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="searches"
    )
    name = models.CharField(max_length=200)
    dataset = models.ForeignKey("datasets.Dataset", on_delete=models.PROTECT, related_name="searches")
    network = models.CharField(max_length=64)
    # What every trial run is asked for before the space's values are put in: config (trainer
    # settings), gpus, executor, nodes, priority; checked by validators.validate_search_request.
    base_request = models.JSONField(default=dict)
    # {name: {"type": "loguniform" | "uniform" | "int" | "choice", "low", "high" | "values"}}
    space = models.JSONField(default=dict)
    objective = models.CharField(max_length=16, choices=Objective.choices, default=Objective.VAL_LOSS)
    direction = models.CharField(max_length=8, choices=Direction.choices, default=Direction.MINIMIZE)
    sampler = models.CharField(max_length=8, choices=Sampler.choices, default=Sampler.TPE)
    pruner = models.CharField(max_length=10, choices=Pruner.choices, default=Pruner.ASHA)
    seed = models.PositiveIntegerField(null=True, blank=True)
    # The budget: trials in all, at once, and the GPU-hours the trials may spend (None: no cap).
    max_trials = models.PositiveIntegerField()
    parallel = models.PositiveIntegerField(default=1)
    gpu_hours_cap = models.FloatField(null=True, blank=True)
    # Trials claimed so far: a pass takes the next one by a conditional update of this count, so
    # two processes never start the same trial.
    trials_claimed = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=8, choices=State.choices, default=State.RUNNING)
    reason = models.CharField(max_length=300, blank=True)
    # The Optuna study's name in the storage (unique there).
    study_name = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_finished(self) -> bool:
        return self.state in self.FINISHED_STATES

    @property
    def group_name(self) -> str:
        return search_group_name(self.pk)


class Trial(OwnedModel):
    """One trial of a search: the run that trains it, the parameters Optuna chose, and where it got."""

    owner_field = "search__owner"

    class State(models.TextChoices):
        RUNNING = "running"  # its run is queued, running or paused
        COMPLETE = "complete"
        PRUNED = "pruned"
        FAILED = "failed"  # its run failed, was aborted, or was refused

    search = models.ForeignKey(Search, on_delete=models.CASCADE, related_name="trials")
    number = models.PositiveIntegerField()  # Optuna's trial number in the study
    study_trial_id = models.PositiveBigIntegerField()  # Optuna's trial id in the storage
    run = models.OneToOneField(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="search_trial")
    params = models.JSONField(default=dict)
    state = models.CharField(max_length=8, choices=State.choices, default=State.RUNNING)
    # The objective: the latest reported while it runs, its final value once it ended.
    value = models.FloatField(null=True, blank=True)
    # Whether `value` is the weights' average's (ema_<objective>): each validation's checkpoint
    # holds the better of the raw weights and their average, and the value is that one's.
    value_averaged = models.BooleanField(default=False)
    rung = models.PositiveIntegerField(null=True, blank=True)  # the last epoch it reported at
    # Why it was pruned or failed, in words.
    reason = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["search", "number"]
        constraints = [models.UniqueConstraint(fields=["search", "number"], name="unique_trial_number_per_search")]

    def __str__(self) -> str:
        return f"trial {self.number}"


class BestRun(OwnedModel):
    """A full run of a search's best trial ("Train the best"). Its key is the search, the trial
    and the full run's epochs: the same request again while this run lives (queued, running,
    paused) answers this run instead of queuing a second one (services.search_train_best)."""

    owner_field = "search__owner"

    search = models.ForeignKey(Search, on_delete=models.CASCADE, related_name="best_runs")
    trial_number = models.PositiveIntegerField()
    epochs = models.FloatField()
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="search_best")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"best of search {self.search_id}: run {self.run_id}"
