"""The new-run form: every field cleaned to its typed value with a message naming the problem,
then the whole request checked by the trainer's own rules (the same validation the API uses)."""

from __future__ import annotations

import json

from django import forms
from django.conf import settings

from datasets.models import Dataset
from trainer.config import (
    ALL_NETWORKS,
    LR_POLICIES,
    MAX_LIST,
    MEAN_MODES,
    OPTIMIZERS,
    PRECISIONS,
    default_of,
    plain_number,
    short_path,
)
from trainer.protocol import DETECTION, TASK_METRICS, TASK_NETWORKS
from trainer.zoo import TIMM_PREFIX, ZOO
from workbench.core.adapters import add_form_errors
from workbench.core.errors import RequestError
from workbench.core.ids import parse_id
from workbench.runs.executors import executor_named
from workbench.runs.models import Run
from workbench.runs.network_fit import sweep_fits
from workbench.runs.services import resolve_placement
from workbench.runs.templatetags.numbers import METRIC_NAMES
from workbench.runs.validators import WholeTextField, check_priority, number_list, sweep_validate, trainer_number
from workbench.runs.web.forms_recipe import RECIPE_PATH, RecipeForm
from workbench.runs.web.forms_start import StartFromForm
from workbench.runs.web.forms_task import CLASSIFIER_LOADER, task_defaults
from workbench.workers.models import Device

NETWORK_INFO = {
    "lenet": (
        "LeNet (Caffe/DIGITS): two convolutions and two fully connected layers; tiny and fast.",
        "small images, gray or colour: 28×28 digits; works from 4×4",
    ),
    "alexnet": (
        "AlexNet: five convolutions, three large fully connected layers (ImageNet 2012).",
        "designed for 224×224 (DIGITS: 256 cropped to 227)",
    ),
    "googlenet": ("GoogLeNet / Inception v1: inception blocks, no large FC layer.", "designed for 224×224"),
    "resnet18": ("ResNet-18: residual blocks; a strong, quick default for photos.", "designed for 224×224"),
    "resnet34": ("ResNet-34: deeper ResNet, basic blocks.", "designed for 224×224"),
    "resnet50": ("ResNet-50: bottleneck blocks; the standard ImageNet baseline.", "designed for 224×224"),
    "vgg16": (
        "VGG-16: 13 convolutions of 3×3 and three big FC layers; heavy.",
        "designed for 224×224; needs at least 32×32",
    ),
    "mobilenet_v3_small": ("MobileNet-V3 small: depthwise convolutions, for phones and CPUs.", "designed for 224×224"),
    "mobilenet_v3_large": (
        "MobileNet-V3 large: depthwise convolutions, more accurate than small.",
        "designed for 224×224",
    ),
    "efficientnet_b0": ("EfficientNet-B0: compound-scaled MBConv blocks.", "designed for 224×224"),
    "vit_b_16": (
        "ViT-B/16: a vision transformer on 16×16 patches; wants lots of data.",
        "square sides that are multiples of 16 (224×224)",
    ),
    # The model zoo (timm's, trainer/zoo.py): its own words and size rules.
    **{TIMM_PREFIX + name: (entry.description, entry.sizes) for name, entry in ZOO.items()},
    "custom": ("Your own network: a list of layers built in the editor below.", "whatever the layers allow"),
    # Detection datasets' networks (torchvision's, trained from random weights here).
    "fasterrcnn_mobilenet_v3_large_320_fpn": (
        "Faster R-CNN, MobileNet-V3 FPN, low resolution: the quickest two-stage detector; CPUs can train it.",
        "any size from 32×32; under 128 px upscaled to 128 inside",
    ),
    "fasterrcnn_mobilenet_v3_large_fpn": (
        "Faster R-CNN, MobileNet-V3 FPN: quick and more accurate.",
        "from 32×32; under 128 px upscaled to 128 inside",
    ),
    "fasterrcnn_resnet50_fpn_v2": ("Faster R-CNN, ResNet-50 FPN v2: the accurate two-stage baseline.", "from 32×32"),
    "retinanet_resnet50_fpn_v2": ("RetinaNet, ResNet-50 FPN v2: one stage, focal loss.", "from 32×32"),
    "fcos_resnet50_fpn": ("FCOS, ResNet-50 FPN: one stage, no anchors.", "from 32×32"),
    "ssdlite320_mobilenet_v3_large": ("SSDlite, MobileNet-V3: one stage at 320×320, for phones.", "resized to 320×320"),
    # Segmentation datasets' networks.
    "lraspp_mobilenet_v3_large": ("LR-ASPP, MobileNet-V3: a light segmentation head; quick on CPUs.", "from 32×32"),
    "deeplabv3_mobilenet_v3_large": ("DeepLabV3, MobileNet-V3: atrous pyramid pooling, light.", "from 32×32"),
    "deeplabv3_resnet50": ("DeepLabV3, ResNet-50: the accurate segmentation baseline.", "from 32×32"),
    "fcn_resnet50": ("FCN, ResNet-50: fully convolutional, the classic.", "from 32×32"),
}


def network_size_note(name: str, shape: tuple[int, int, int, int], problem: str) -> str:
    """The network table's "Image sizes" cell for this dataset: why the network cannot take its
    images, or that it takes them, with the size the network was designed for (a note that
    held for every dataset, "fine from 32×32", read as a warning on an 8×8 one)."""
    if problem:
        return problem
    note = f"takes these {shape[2]}×{shape[1]} images; {NETWORK_INFO[name][1]}"
    if name in TASK_NETWORKS[DETECTION]:
        from trainer.tasks.detection import detector_side  # torchvision's detectors: loaded for a detector's row only

        short, _ = detector_side(name, shape[1], shape[2])
        if short > min(shape[1], shape[2]):
            note += f"; upscaled inside to a short side of {short} (its coarse feature map needs it)"
    return note


DEVICE_CHOICES = [
    ("auto", "Next available GPU (the CPU when there is no GPU)"),
    ("count", "A number of GPUs, next available"),
    ("specific", "These GPUs"),
    ("cpu", "The CPU"),
]

# Each form field that sets a trainer setting -> the setting's path in the trainer config. The
# form's initial values are the trainer's defaults of these paths (trainer/config.py, the one home
# of defaults, which the API, the CLI and sweeps fall back on too); a field left empty is left to
# that default. The learning rate and the batch size come from the sweep grid (run_request).
CONFIG_PATH = {
    # The fields named as short names (trainer.config.SHORT_FIELDS; `optimizer` is its alias).
    **{name: short_path(name) for name in ("optimizer", "momentum", "weight_decay", "lr_policy", "epochs")},
    "gamma": "solver.gamma",
    "power": "solver.power",
    "step_size": "solver.step_size",
    "step_values": "solver.step_values",
    "min_lr": "solver.min_lr",
    "warmup_percent": "solver.warmup_percent",
    "onecycle_pct_start": "solver.onecycle_pct_start",
    "onecycle_div_factor": "solver.onecycle_div_factor",
    "onecycle_final_div_factor": "solver.onecycle_final_div_factor",
    "grad_clip_norm": "solver.grad_clip_norm",
    "grad_accum": "grad_accum",
    "val_interval": "val_interval",
    "snapshot_interval": "snapshot_interval",
    "seed": "seed",
    "precision": "precision",
    "channels_last": "channels_last",
    "compile": "compile",
    "best_metric": "best_metric",
    "early_stopping_patience": "early_stopping_patience",
    "early_stopping_min_delta": "early_stopping_min_delta",
    "model_parallel": "model_parallel",
    "custom_layers": "custom_layers",
    "crop_size": "data.crop_size",
    "random_flip": "data.random_flip",
    "vertical_flip": "data.vertical_flip",
    "mean_subtraction": "data.mean_subtraction",
    "num_workers": "data.num_workers",
    **RECIPE_PATH,
    "freeze_backbone_epochs": "freeze_backbone_epochs",
    "backbone_lr_mult": "backbone_lr_mult",
    "freeze_bn": "freeze_bn",
}
# The swept fields: the form's base_lr is the request's short name lr.
SWEPT_PATH = {"base_lr": short_path("lr"), "batch_size": short_path("batch_size")}

# A request path (RequestError.field, without "config.") -> the form field that sets it.
FIELD_OF = {path: name for name, path in {**CONFIG_PATH, **SWEPT_PATH}.items()} | {
    "sweep": "base_lr",
    "sweep.lr": "base_lr",
    "sweep.batch_size": "batch_size",
    "pretrained": "start_from",
    "data.norm_mean": "start_from",
    "data.norm_std": "start_from",
    "devices": "device_mode",
    "gpus": "device_mode",
}


def initial_of(path: str):
    """The trainer's default of `path` as the form shows it: numbers and lists as text."""
    value = default_of(path)
    if isinstance(value, list) and path != "custom_layers":
        return ", ".join(plain_number(item) for item in value)
    # Numbers as people write them: 10, not 10.0; 10000, not 10000.0.
    return plain_number(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def usable_datasets(user):
    return Dataset.objects.visible_to(user).filter(status=Dataset.Status.READY)


class DatasetChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Dataset) -> str:
        colour = "gray" if obj.channels == 1 else "colour"
        return (
            f"{obj.name} ({obj.image_width}×{obj.image_height} {colour}, {len(obj.labels or [])} classes, "
            f"{obj.image_count} images)"
        )


class RunForm(RecipeForm, StartFromForm):
    name = forms.CharField(max_length=150, required=False, help_text="Blank: network on dataset")
    dataset = forms.ModelChoiceField(
        queryset=Dataset.objects.none(),
        empty_label=None,
        error_messages={"invalid_choice": "Choose one of your ready datasets."},
    )
    # Every task's networks; the page shows the dataset's task's, and network_fit refuses the others.
    network = forms.ChoiceField(choices=[(n, n) for n in ALL_NETWORKS], initial=default_of("network"))
    custom_layers = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}))

    optimizer = forms.ChoiceField(choices=[(o, o) for o in OPTIMIZERS])
    base_lr = forms.CharField(label="Base learning rate", help_text="Several, separated by commas, make a sweep")
    momentum = trainer_number("solver.momentum", help_text="SGD, Nesterov, RMSprop")
    weight_decay = trainer_number("solver.weight_decay")
    lr_policy = forms.ChoiceField(choices=[(p, p) for p in LR_POLICIES], label="Policy")
    gamma = trainer_number("solver.gamma", help_text="step, multistep, exp, inv, sigmoid")
    power = trainer_number("solver.power", help_text="inv, poly")
    step_size = trainer_number("solver.step_size", help_text="% of the run (step, sigmoid)")
    step_values = forms.CharField(help_text="% of the run, comma-separated (multistep)")
    min_lr = trainer_number("solver.min_lr", help_text="cosine floor")
    warmup_percent = trainer_number("solver.warmup_percent", label="Warmup (% of the run)")
    onecycle_pct_start = trainer_number("solver.onecycle_pct_start", label="One-cycle rise share")
    onecycle_div_factor = trainer_number("solver.onecycle_div_factor", label="One-cycle start divisor")
    onecycle_final_div_factor = trainer_number("solver.onecycle_final_div_factor", label="One-cycle final divisor")
    grad_clip_norm = trainer_number(
        "solver.grad_clip_norm", required=False, min_value=0.000001, label="Gradient clipping (norm)"
    )

    epochs = trainer_number("epochs", min_value=0.01)
    batch_size = forms.CharField(help_text="Several, separated by commas, make a sweep")
    grad_accum = trainer_number("grad_accum", label="Gradient accumulation")
    val_interval = trainer_number("val_interval", label="Validate every (epochs)")
    snapshot_interval = trainer_number("snapshot_interval", label="Snapshot every (epochs)")
    seed = trainer_number("seed", help_text="The same seed and settings give the same run; change it for another draw")
    crop_size = trainer_number("data.crop_size", required=False, label="Random crop (pixels)")
    random_flip = forms.BooleanField(required=False, label="Horizontal flips")
    vertical_flip = forms.BooleanField(required=False, label="Vertical flips")
    # Not required: a dataset whose task reads no mean image is not offered it (forms_task).
    mean_subtraction = forms.ChoiceField(choices=[(m, m) for m in MEAN_MODES], required=False)
    precision = forms.ChoiceField(choices=[(p, p) for p in PRECISIONS], label="Mixed precision")
    channels_last = forms.BooleanField(required=False)
    compile = forms.BooleanField(required=False, label="torch.compile")
    # Every task's metrics (trainer/protocol.py TASK_METRICS, the trainer's own list); new_run.js
    # offers the chosen dataset's task's only ("top1" on a detection dataset meant mAP, unsaid).
    best_metric = forms.ChoiceField(
        choices=[(m, METRIC_NAMES.get(m, m)) for m in dict.fromkeys(m for ms in TASK_METRICS.values() for m in ms)],
        help_text="the best checkpoint's; early stopping's",
        widget=forms.Select(attrs={"data-task-metrics": json.dumps(TASK_METRICS)}),
    )
    early_stopping_patience = trainer_number(
        "early_stopping_patience",
        required=False,
        label="Early stopping patience",
        help_text="validations without improvement before the run stops (0: off)",
    )
    early_stopping_min_delta = trainer_number(
        "early_stopping_min_delta",
        required=False,
        label="Early stopping min delta",
        help_text="smaller gains do not count",
    )
    num_workers = trainer_number("data.num_workers", label="Data loader workers")

    device_mode = forms.ChoiceField(choices=DEVICE_CHOICES, initial="auto", widget=forms.RadioSelect, label="Devices")
    gpu_count = WholeTextField(initial=1, min_value=1, max_value=64, required=False, label="Number of GPUs")
    model_parallel = trainer_number(
        "model_parallel",
        required=False,
        label="GPUs per model copy",
        help_text="Above 1, the network is split over this many GPUs (model parallel) and data parallelism "
        "runs over the groups: for networks too big for one GPU's memory. The number of GPUs must be a multiple of it.",
    )
    gpus = forms.MultipleChoiceField(choices=(), required=False, widget=forms.CheckboxSelectMultiple)
    # Offered only where Slurm is enabled (the field is removed otherwise).
    executor = forms.ChoiceField(
        choices=[("local", "The workbench's workers"), ("slurm", "The Slurm cluster (a batch job)")],
        initial="local",
        required=False,
        widget=forms.RadioSelect,
        label="Runs on",
    )
    nodes = trainer_number(
        "nodes",
        initial=1,
        required=False,
        label="Nodes",
        help_text="Slurm only: the run spans this many nodes, with the GPUs above on each (one process per GPU).",
    )
    priority = WholeTextField(initial=0, required=False, help_text="-100 to 100, higher first (staff only)")

    def __init__(self, *args, user, preview: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        for name, path in {**CONFIG_PATH, **SWEPT_PATH}.items():
            self.fields[name].initial = initial_of(path)
        self.fields["dataset"].queryset = usable_datasets(user)
        for name in CLASSIFIER_LOADER:  # hidden and not sent for another task, as the recipe (new_run.js)
            self.fields[name].widget.attrs["data-classification-only"] = ""
        if not self.is_bound:
            self._start_on_dataset()
        self._offer_starts(preview=preview)
        devices = Device.objects.filter(kind=Device.Kind.GPU).select_related("host")
        self.fields["gpus"].choices = [
            (f"{d.host.hostname}:{d.index}", f"{d.host.hostname} GPU {d.index}") for d in devices
        ]
        if not user.is_staff:
            del self.fields["priority"]
        if not settings.SLURM_ENABLED:
            del self.fields["executor"], self.fields["nodes"]

    def _start_on_dataset(self) -> None:
        """A new form starts from its dataset's task's values (forms_task.task_defaults: a batch
        the pre-flight takes, the task's best metric); a clone's, in `initial`, stay the run's."""
        datasets = self.fields["dataset"].queryset
        chosen = parse_id(self.initial.get("dataset"))
        dataset = (datasets.filter(pk=chosen).first() if chosen else None) or datasets.first()
        if dataset is not None:
            for name, value in task_defaults(dataset).items():
                self.fields[name].initial = value

    # ------------------------------------------------------------------ fields

    def clean_name(self):
        return self.cleaned_data["name"].strip()

    def clean_mean_subtraction(self):  # not sent: the trainer's default
        return self.cleaned_data["mean_subtraction"] or None

    def clean_base_lr(self):
        values = number_list(self.cleaned_data["base_lr"], path="solver.base_lr", label="positive number")
        if any(v <= 0 for v in values):
            raise forms.ValidationError("The learning rate must be above 0.")
        return values

    def clean_batch_size(self):
        return number_list(self.cleaned_data["batch_size"], path="batch_size", label="whole number")

    def clean_step_values(self):
        values = number_list(self.cleaned_data["step_values"], path="solver.step_size", label="percent", most=MAX_LIST)
        return sorted(values)

    def clean_custom_layers(self):
        raw = self.cleaned_data["custom_layers"].strip()
        if not raw:
            return None
        try:
            layers = json.loads(raw)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(f"Not valid JSON: {error.msg} at line {error.lineno}.") from None
        if not isinstance(layers, list) or not all(isinstance(layer, dict) for layer in layers):
            raise forms.ValidationError('Expected a list of layers such as [{"type": "conv2d", ...}].')
        return layers

    def clean_priority(self):
        try:
            return check_priority(self.cleaned_data["priority"], by_staff=self.user.is_staff)
        except RequestError as error:
            raise forms.ValidationError(error.message) from None

    def clean_gpus(self):
        chosen = self.cleaned_data["gpus"]
        hosts = {value.rsplit(":", 1)[0] for value in chosen}
        if len(hosts) > 1:
            raise forms.ValidationError(f"Choose GPUs of one host (chosen: {', '.join(sorted(hosts))}).")
        return chosen

    # ------------------------------------------------------------------ the whole request

    def gpus_request(self) -> str:
        data = self.cleaned_data
        mode = data.get("device_mode")
        if mode == "count":
            return str(data.get("gpu_count") or 1)
        if mode == "specific":
            chosen = data.get("gpus") or []
            host = chosen[0].rsplit(":", 1)[0] if chosen else ""
            return f"{host}:{','.join(sorted((c.rsplit(':', 1)[1] for c in chosen), key=int))}"
        return mode or "auto"

    def base_config(self) -> dict:
        """The trainer settings of CONFIG_PATH, nested as the trainer config has them; an empty
        field (None) is left out, for the trainer's default."""
        config: dict = {}
        for name, path in CONFIG_PATH.items():
            value = self.cleaned_data.get(name)
            if value is not None:
                owner, _, leaf = path.rpartition(".")
                (config.setdefault(owner, {}) if owner else config)[leaf] = value
        return config

    def run_request(self, *, pretrained: str | None = None) -> tuple[dict, dict]:
        """The run fields and the sweep grid, in the shape POST /api/sweeps/ takes them."""
        d = self.cleaned_data
        config = self.base_config()
        if pretrained:
            config["pretrained"] = pretrained
        fields = {
            "name": d["name"],
            "network": d["network"],
            "config": config,
            "gpus": self.gpus_request(),
            "priority": d.get("priority") or 0,  # checked by clean_priority
            "executor": d.get("executor") or "local",
            "nodes": d.get("nodes") or 1,
        }
        return fields, {"lr": d["base_lr"], "batch_size": d["batch_size"]}

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        dataset: Dataset = data["dataset"]
        self._check_weights(data)
        self._check_layers(data)
        if self.errors:
            return data
        if data["device_mode"] == "specific" and not data.get("gpus"):
            self.add_error("gpus", "Tick at least one GPU, or choose another device option.")
            return data
        # The rules of validators (the API's and the CLI's too: the trainer's config checks and its
        # pre-flight on the dataset), before anything is stored; the weights are checked above and
        # resolved on submit.
        fields, grid = self.run_request()
        try:
            request, executor, nodes = resolve_placement(
                gpus=fields["gpus"], executor=fields["executor"], nodes=fields["nodes"]
            )
            sweep_fits(
                network=fields["network"], config=fields["config"], grid=grid, dataset=dataset, request=request,
                memory_known=executor_named(executor).knows_device_memory,
            )  # fmt: skip
            self.combinations = sweep_validate(
                config=fields["config"],
                grid=grid,
                network=fields["network"],
                request=request,
                nodes=nodes,
                with_weights=data["start_from"] != "scratch",
                dataset=dataset,
            )
        except RequestError as error:
            add_form_errors(self, error, field_of=FIELD_OF)
        return data

    def _check_layers(self, data) -> None:
        if data["network"] != "custom":
            data["custom_layers"] = None
        elif not data.get("custom_layers"):
            self.add_error("custom_layers", "Add at least one layer, ending with a linear layer.")


class RunEditForm(forms.ModelForm):
    class Meta:
        model = Run
        fields = ["name", "notes"]
        widgets = {"notes": forms.Textarea(attrs={"rows": 6})}

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("A run needs a name.")
        return name
