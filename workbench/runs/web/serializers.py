from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied

from trainer.config import ALL_NETWORKS, OPTIMIZERS, SHORT_FIELDS, default_of, plain_number, with_setting
from workbench.core.errors import NotAllowed, RequestError
from workbench.core.ids import MAX_ID
from workbench.runs.models import Run, RunTransition
from workbench.runs.selectors import run_best
from workbench.runs.validators import MAX_NODES, MAX_PRIORITY, check_priority
from workbench.workers.models import Device


def _viewer(serializer: serializers.Serializer):
    """Who reads the answer (context["request"]); without one, text is rendered as for a stranger."""
    request = serializer.context.get("request")
    return getattr(request, "user", None)


class DeviceSerializer(serializers.ModelSerializer):
    host = serializers.CharField(source="host.hostname")

    class Meta:
        model = Device
        fields = ["host", "kind", "index", "label", "name", "simulated"]


class TransitionSerializer(serializers.ModelSerializer):
    class Meta:
        model = RunTransition
        fields = ["from_state", "to_state", "reason", "at"]


class RunSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username")
    project = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True, help_text="its project's slug, or null"
    )
    dataset_name = serializers.CharField(source="dataset.name")
    dataset_version = serializers.SerializerMethodField()
    devices = DeviceSerializer(many=True)
    requested_devices = serializers.CharField(source="device_request_text")
    wait_reason = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = [
            "id", "name", "owner", "project", "dataset", "dataset_name", "dataset_version", "network", "state",
            "priority", "device_request", "requested_devices", "devices", "progress", "eta_seconds", "wait_reason",
            "estimated_start", "attempt", "error", "notes", "sweep", "created_at", "started_at", "finished_at",
            "executor", "nodes", "slurm_job_id", "slurm_state",
        ]  # fmt: skip

    @extend_schema_field(
        {"type": "object",
         "properties": {"number": {"type": "integer"}, "digest": {"type": "string", "nullable": True}},
         "description": "the dataset version it trains on; version 1 is the build (digest null until built)"}
    )  # fmt: skip
    def get_dataset_version(self, run: Run) -> dict:
        version = run.dataset_version
        return {"number": run.dataset_version_number, "digest": version.digest if version is not None else None}

    def get_wait_reason(self, run: Run) -> str:
        return run.wait_reason_for(_viewer(self))


class BestSerializer(serializers.Serializer):
    """The best checkpoint's validation (selectors.run_best), as the run page shows it."""

    metric = serializers.CharField(help_text="the metric best.pt is chosen by (config.best_metric, for the task)")
    series = serializers.CharField(help_text="the validation series it was read from: ema_<metric> for the EMA's")
    averaged = serializers.BooleanField(help_text="true: best.pt holds the weights' average (EMA)")
    weights = serializers.ChoiceField(
        choices=["raw", "ema"],
        help_text="the weights best.pt holds (inference and exports load them): the better of the raw "
        "weights and their average at that validation, or config.best_weights",
    )
    weights_words = serializers.CharField(
        allow_null=True, help_text='"EMA" or "raw weights" as the pages say it; null when the run keeps no average'
    )
    value = serializers.FloatField()
    epoch = serializers.FloatField(allow_null=True)
    step = serializers.IntegerField(allow_null=True)


class RunDetailSerializer(RunSerializer):
    transitions = TransitionSerializer(many=True)
    host = serializers.CharField(source="host.hostname", default=None, allow_null=True)
    config = serializers.SerializerMethodField()
    best = serializers.SerializerMethodField()

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "config", "host", "transitions", "last_seq", "best"]

    @extend_schema_field(BestSerializer(allow_null=True))
    def get_best(self, run: Run) -> dict | None:
        return run_best(run)

    def get_config(self, run: Run) -> dict:
        # `pretrained` is stored as its reference (upload:<id>, run:<id>, weights:<id>), never a path.
        return run.config or {}


@extend_schema_field(OpenApiTypes.NUMBER)
class TrainerValue(serializers.Field):
    """A trainer config value passed through untouched, for the trainer's own checks."""

    def __init__(self, **kwargs) -> None:
        super().__init__(required=False, **kwargs)

    def to_internal_value(self, data):
        return data

    def to_representation(self, value):
        return value


@extend_schema_field({"type": "integer", "minimum": -MAX_PRIORITY, "maximum": MAX_PRIORITY})
class PriorityValue(serializers.Field):
    """A priority passed through as sent, for the one rule of validators.check_priority."""

    def __init__(self, **kwargs) -> None:
        super().__init__(help_text=f"-{MAX_PRIORITY} to {MAX_PRIORITY}, staff only", **kwargs)

    def to_internal_value(self, data):
        return data

    def to_representation(self, value):
        return value


def _checked_priority(value, *, by_staff: bool) -> int:
    """check_priority, its refusal as DRF's: a 400 naming priority, or a 403 for a non-staff user."""
    try:
        return check_priority(value, by_staff=by_staff)
    except NotAllowed as error:
        raise PermissionDenied(error.message) from None
    except RequestError as error:
        raise serializers.ValidationError(error.message) from None


# The short fields a run request takes beside `config` (README: POST /api/runs/).
SHORT_NAMES = ("epochs", "batch_size", "lr", "solver")


class RunCreateSerializer(serializers.Serializer):
    """The short form of a run: the common fields, plus any trainer config field in `config`."""

    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    dataset = serializers.IntegerField(min_value=1, max_value=MAX_ID)
    network = serializers.ChoiceField(choices=ALL_NETWORKS)
    # Handed to the trainer's validator as sent: DRF's FloatField read JSON true as 1.0 and let
    # 1e308 through; the trainer's RANGES judge them, as for the same fields inside `config`.
    epochs = TrainerValue(
        help_text=f"epochs (a positive number); the same as config.epochs; default {plain_number(default_of('epochs'))}"
    )
    batch_size = TrainerValue(
        help_text="the global batch (a positive integer); the same as config.batch_size; "
        f"default {default_of('batch_size')}"
    )
    lr = TrainerValue(
        help_text="the base learning rate; the same as config.solver.base_lr; "
        f"default {plain_number(default_of('solver.base_lr'))}"
    )
    solver = serializers.ChoiceField(choices=OPTIMIZERS, required=False)
    gpus = serializers.CharField(
        required=False, default="auto", help_text="auto | cpu | N | HOST:0,1 (per node on Slurm)"
    )
    executor = serializers.ChoiceField(
        choices=Run.Executor.choices, required=False, default="local", help_text="slurm: a batch job (when enabled)"
    )
    nodes = serializers.IntegerField(
        required=False, default=1, min_value=1, max_value=MAX_NODES, help_text="nodes the run spans (Slurm only)"
    )
    priority = PriorityValue(required=False, default=0)
    dataset_version = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_ID,
        help_text="the dataset's version to train on; default: its latest",
    )
    project = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, max_length=200,
        help_text="the project it goes into (a slug of one you are a member of), or null for none; "
        "left out: its dataset's project, when you are a member of it",
    )  # fmt: skip
    config = serializers.DictField(
        required=False,
        default=dict,
        help_text="any trainer setting (docs/formats.md); what is left out is the trainer's default, and the run "
        "stores every setting it trains with",
    )

    def validate_priority(self, value) -> int:
        viewer = _viewer(self)
        return _checked_priority(value, by_staff=bool(viewer and viewer.is_staff))

    def trainer_config(self) -> dict:
        """`config` with the short fields sent beside it put at their paths (trainer.config.SHORT_FIELDS)."""
        data = self.validated_data
        config = data["config"]
        for name in SHORT_NAMES:
            if name in data:
                config = with_setting(config, SHORT_FIELDS[name], data[name])
        return config


class SweepCreateSerializer(RunCreateSerializer):
    """A run's fields plus the values to sweep; one run per combination (POST /api/sweeps/)."""

    sweep = serializers.DictField(
        help_text='lists of values for lr and batch_size, e.g. {"lr": [0.1, 0.01], "batch_size": [32, 64]}'
    )


class PrioritySerializer(serializers.Serializer):
    """A run's new priority (PATCH): only staff change one, any value in the range."""

    priority = PriorityValue()

    def validate_priority(self, value) -> int:
        return _checked_priority(value, by_staff=True)


class PretrainedWeightsSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    reference = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    project = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True, help_text="its project's slug, or null"
    )
    size_bytes = serializers.IntegerField(read_only=True)
    created = serializers.DateTimeField(read_only=True)


class PretrainedUploadSerializer(serializers.Serializer):
    file = serializers.FileField()
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
