"""The new-run page (also Clone and sweeps) and the JSON endpoints its script calls while the
user edits: the learning-rate preview, the custom network's shapes, the networks' fit to the
dataset, and whether the run would start now or wait in the queue."""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import re

from django.contrib import messages
from django.http import HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_GET, require_POST

from datasets.images import to_png_bytes
from datasets.models import Dataset
from trainer.config import NETWORKS, ConfigError, config_from_dict, networks_of
from trainer.preflight import IMAGE_RULES, DatasetFacts, batch_refusal, preflight, side_refusal
from trainer.protocol import task_of_network
from trainer.zoo import is_timm, network_family, zoo_entry
from workbench.core.adapters import add_form_errors
from workbench.core.errors import RequestError
from workbench.core.ids import parse_id
from workbench.core.task_table import task_row
from workbench.runs import services
from workbench.runs.executors import check_executor, executor_named
from workbench.runs.models import Run
from workbench.runs.network_fit import network_input, parameter_count
from workbench.runs.selectors import run_for
from workbench.runs.validators import check_model_parallel, parse_device_request, preflight_facts, sweep_config
from workbench.runs.web.forms import FIELD_OF, NETWORK_INFO, RunForm, network_size_note, usable_datasets
from workbench.runs.web.forms_clone import initial_from_run
from workbench.runs.web.forms_recipe import PREVIEW_FIELDS, RECIPE_PATH, presets_for_page
from workbench.runs.web.forms_task import task_defaults, train_images
from workbench.weights.files import WeightsError
from workbench.weights.uploads import weights_upload

PREVIEW_POINTS = 200


def dataset_facts(dataset: Dataset) -> dict:
    """What the page's script knows of a dataset before asking anything: its size, its task, the
    form's starting values on it (forms_task) and whether its task takes the recipe."""
    train = train_images(dataset)
    return {
        "id": dataset.pk,
        "name": dataset.name,
        "width": dataset.image_width,
        "height": dataset.image_height,
        "channels": dataset.channels,
        "classes": len(dataset.labels or []),
        "train": train,
        "images": dataset.image_count,
        "task": dataset.task,
        "defaults": task_defaults(dataset),
        "recipe": task_row(dataset.task).takes_recipe,
    }


def run_page_url(run: Run) -> str:
    try:
        return reverse("run-detail", args=[run.pk])
    except NoReverseMatch:  # the live run page is not installed: the list shows the run
        return reverse("run-list") + f"#run-{run.pk}"


def run_new(request):
    initial = {}
    clone, dataset = parse_id(request.GET.get("clone", "")), parse_id(request.GET.get("dataset", ""))
    if clone:
        initial = initial_from_run(run_for(request.user, clone))
    elif dataset:
        initial["dataset"] = dataset
    form = RunForm(request.POST or None, request.FILES or None, user=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        runs = _submit(request, form)
        if runs:
            if len(runs) == 1:
                messages.success(request, f"Run #{runs[0].pk} {runs[0].name} is queued.")
                return redirect(run_page_url(runs[0]))
            messages.success(request, f"Sweep {runs[0].sweep}: {len(runs)} runs queued.")
            return redirect(reverse("run-list") + f"?sweep={runs[0].sweep}")
    return render_new_run(request, form, cloned_from=clone)


def render_new_run(request, form: RunForm, *, cloned_from: int | None = None, **more) -> HttpResponse:
    """The new-run page with `form` (bound with its errors, or not); `more` adds to its context
    (the searches app's view renders it again with its search form)."""
    datasets = usable_datasets(request.user)
    context = {
        "form": form,
        "cloned_from": cloned_from,
        "datasets": {str(d.pk): dataset_facts(d) for d in datasets},
        "network_info": {
            name: {"description": text, "sizes": sizes, "family": network_family(name), "task": task_of_network(name)}
            for name, (text, sizes) in NETWORK_INFO.items()
        },
        "has_datasets": datasets.exists(),
        "presets": presets_for_page(),
        **more,
    }
    return render(request, "runs/new_run.html", context)


def submitted_weights(request, form: RunForm) -> str | None:
    """The reference of the weights to start from; an upload becomes one of the user's uploads
    first (checked to hold a state_dict). run_submit resolves the reference to a file."""
    data = form.cleaned_data
    if data["start_from"] != "upload":
        return form.pretrained_reference
    upload = data["pretrained_file"]
    try:
        weights = weights_upload(owner=request.user, name=upload.name, chunks=upload, size=upload.size)
    except WeightsError as error:
        form.add_error("pretrained_file", f"{error}.")
        return None
    return weights.reference


def _submit(request, form: RunForm) -> list[Run]:
    """One run (services.run_submit) or a sweep of runs (services.sweep_create, as POST /api/sweeps/)."""
    pretrained = submitted_weights(request, form)
    if form.errors:
        return []
    fields, grid = form.run_request(pretrained=pretrained)
    dataset = form.cleaned_data["dataset"]
    try:
        if len(form.combinations) > 1:
            return services.sweep_create(owner=request.user, dataset=dataset, base_request=fields, grid=grid)
        ((combination, _),) = form.combinations
        config = sweep_config(fields.pop("config"), combination)
        return [services.run_submit(owner=request.user, dataset=dataset, config=config, **fields)]
    except RequestError as error:
        add_form_errors(form, error, field_of=FIELD_OF)
        return []


# ----------------------------------------------------------------------------- live previews


def _clean_subset(form: RunForm, names: list[str]) -> tuple[dict, dict]:
    """Clean only `names` (each with its clean_<name>), as the full form would."""
    cleaned, errors = {}, {}
    for name in names:
        field = form.fields[name]
        value = field.widget.value_from_datadict(form.data, form.files, form.add_prefix(name))
        try:
            form.cleaned_data = {name: field.clean(value)}
            method = getattr(form, f"clean_{name}", None)
            cleaned[name] = method() if method else form.cleaned_data[name]
        except Exception as error:  # django.forms.ValidationError
            messages_ = getattr(error, "messages", [str(error)])
            errors[name] = " ".join(messages_)
    return cleaned, errors


SOLVER_FIELDS = [
    "dataset",
    "epochs",
    "batch_size",
    "optimizer",
    "base_lr",
    "lr_policy",
    "gamma",
    "power",
    "step_size",
    "step_values",
    "min_lr",
    "warmup_percent",
    "onecycle_pct_start",
    "onecycle_div_factor",
    "onecycle_final_div_factor",
    "momentum",
    "weight_decay",
]


def _lr_trace(cleaned: dict, *, lr: float, batch: int, train: int) -> dict:
    """One sweep combination's learning rate over the whole run (trainer.solver.lr_curve, with
    the engine's own step count); ValueError and friends for a policy that cannot be computed."""
    # torch (through the trainer) is loaded on the first such request, not by every web process.
    from trainer.config import SolverConfig  # torch: loaded only where this runs
    from trainer.solver import lr_curve, total_steps  # torch: loaded only where this runs

    steps_per_epoch = train // batch
    total = total_steps(cleaned["epochs"], train, batch)
    names = ["optimizer", "lr_policy", "gamma", "power", "step_size", "step_values", "min_lr", "warmup_percent"]
    names += ["onecycle_pct_start", "onecycle_div_factor", "onecycle_final_div_factor"]
    solver = SolverConfig(base_lr=lr, **{name: cleaned[name] for name in names})
    points = lr_curve(solver, total, PREVIEW_POINTS)
    return {
        "name": f"lr={lr:g} bs={batch}",
        "base_lr": lr,
        "batch_size": batch,
        "total_steps": total,
        "steps_per_epoch": steps_per_epoch,
        "steps": [s for s, _ in points],
        "epochs": [round(s / steps_per_epoch, 4) for s, _ in points],
        "lr": [v for _, v in points],
    }


@require_POST
def lr_preview(request):
    """The learning rate over the whole run, per sweep combination."""
    form = RunForm(request.POST, user=request.user, preview=True)
    cleaned, errors = _clean_subset(form, SOLVER_FIELDS)
    if errors:
        return JsonResponse({"errors": errors}, status=400)
    train = int((cleaned["dataset"].splits or {}).get("train", {}).get("count", 0))
    traces = []
    for lr in cleaned["base_lr"]:
        for batch in cleaned["batch_size"]:
            refusal = batch_refusal(batch, train)  # the pre-flight's rule, for each batch of the sweep
            if refusal:
                return JsonResponse({"errors": {"batch_size": refusal.message}}, status=400)
            try:
                traces.append(_lr_trace(cleaned, lr=lr, batch=batch, train=train))
            except (ValueError, OverflowError, ZeroDivisionError) as error:
                return JsonResponse({"errors": {"lr_policy": str(error)}}, status=400)
    return JsonResponse({"traces": traces})


_LAYER = re.compile(r"^layer (\d+)")


def _crop(value) -> int | None:
    """A preview's crop as sent (text or a number); network_input takes only a side the trainer
    would (a 400-digit crop reached torch as a shape)."""
    if isinstance(value, str):
        value = int(value) if value.strip().isdecimal() and len(value.strip()) <= 6 else None
    return value


@require_POST
def layer_shapes(request):
    """Per-layer output shapes of a custom network on the chosen dataset (trainer.custom_net)."""
    # torch (through the trainer) is loaded on the first such request, not by every web process.
    from trainer.custom_net import CustomNetError  # torch: loaded only where this runs
    from trainer.custom_net import layer_shapes as shapes_of  # torch: loaded only where this runs

    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        body = None
    body = body if isinstance(body, dict) else {}
    dataset = usable_datasets(request.user).filter(pk=parse_id(body.get("dataset"))).first()
    if dataset is None:
        return JsonResponse({"error": "dataset: choose one of your ready datasets"}, status=400)
    layers = body.get("layers")
    shape = network_input(dataset, _crop(body.get("crop_size")))
    try:
        shapes = shapes_of(layers, *shape)
        params = parameter_count("custom", shape, layers)
    except CustomNetError as error:
        match = _LAYER.match(str(error))
        return JsonResponse({"error": str(error), "index": int(match.group(1)) if match else None}, status=400)
    return JsonResponse({"shapes": shapes, "params": params})


@functools.lru_cache(maxsize=256)
def _network_fit(name: str, shape: tuple[int, int, int, int]) -> dict:
    # torch (through the trainer) is loaded on the first such request, not by every web process.
    from trainer.networks import (  # torch: loaded only where this runs
        InputSpec,
        NetworkError,
        check_input_size,
        network_cost,
    )

    if name in NETWORKS and name != "custom":
        # One meta-device forward gives the parameters and the GFLOPs at the dataset's size; the
        # size rules below are asked only when it fails (their bisection costs a dozen builds).
        with contextlib.suppress(NetworkError, RuntimeError, ValueError, AssertionError):
            params, gflops = network_cost(name, InputSpec(*shape))
            return {"params": params, "gflops": round(gflops, 3), "problem": ""}
    try:
        if name in NETWORKS:
            check_input_size(name, InputSpec(*shape))
        problem = ""
    except NetworkError as error:
        problem = str(error)
    if name not in NETWORKS:  # the pre-flight's rule for a detector's or a segmentation network's images
        refused = side_refusal(name, DatasetFacts(task=task_of_network(name), width=shape[2], height=shape[1]))
        problem = refused.message if refused else ""
    try:
        # A transformer's size hardly changes its parameters: counted at its own 224x224 when the
        # images do not fit its patches.
        patches = name == "vit_b_16" or (is_timm(name) and zoo_entry(name).multiple > 1)
        params = parameter_count(name, shape if not problem or not patches else (shape[0], 224, 224, shape[3]))
    except NetworkError:
        params = None
    return {"params": params, "gflops": None, "problem": problem}


def _with_note(name: str, shape: tuple[int, int, int, int]) -> dict:
    fit = _network_fit(name, shape)
    return {**fit, "note": network_size_note(name, shape, fit["problem"])}


@require_GET
def network_fit(request):
    """Parameter count of every standard network for the dataset, and whether its images fit;
    with only=<names> those of the zoo (timm's) instead: the page asks for them afterwards, a few
    at a time (a build on the meta device each), so a later answer for the classic networks never
    waits behind thirty builds."""
    dataset = usable_datasets(request.user).filter(pk=parse_id(request.GET.get("dataset", ""))).first()
    if dataset is None:
        return JsonResponse({"error": "dataset: choose one of your ready datasets"}, status=400)
    shape = network_input(dataset, _crop(request.GET.get("crop_size", "")))
    only = set(request.GET.get("only", "").split(",")) - {""}
    # Only the dataset's task's networks can train on it; the page hides the others.
    mine = networks_of(dataset.task)
    result = {
        name: _with_note(name, shape) if name in mine else {"params": None, "problem": "", "other_task": True}
        for name in NETWORK_INFO
        if name != "custom" and (name in only if only else not is_timm(name))
    }
    # The page offers the recipe (presets, augmentations, their preview) where the task takes it.
    recipe = task_row(dataset.task).takes_recipe
    return JsonResponse({"networks": result, "input": list(shape[:3]), "task": dataset.task, "recipe": recipe})


@require_POST
def augment_preview(request):
    """Eight augmented copies of the chosen dataset's first training image with the form's
    augmentations (as the new-dataset wizard previews its resize modes): JSON of PNG data URLs,
    or the fields' errors."""
    form = RunForm(request.POST, user=request.user, preview=True)
    cleaned, errors = _clean_subset(form, list(PREVIEW_FIELDS))
    if errors:
        return JsonResponse({"errors": errors}, status=400)
    dataset = cleaned.pop("dataset")
    row = task_row(dataset.task)
    if not row.takes_recipe:
        # The preview draws a classifier's loader and recipe; these runs augment each image
        # jointly with its boxes or mask instead (trainer/tasks/: flip, scale jitter, crop).
        why = (
            f"this is a {dataset.task} dataset: its runs flip, scale-jitter and crop each image together "
            f"with its {row.targets}, which this preview does not draw"
        )
        return JsonResponse({"errors": {"__all__": why}}, status=400)
    data = {RECIPE_PATH.get(name, f"data.{name}").split(".")[1]: v for name, v in cleaned.items() if v is not None}
    try:
        cfg = config_from_dict({"run_dir": "preview", "data": data}, check_paths=False)
        # The pre-flight's rules on the images: the crop fits them, the recipe applies to them.
        refusals = preflight(cfg, preflight_facts(dataset), rules=IMAGE_RULES)
        if refusals:
            raise refusals[0]
    except ConfigError as error:
        return JsonResponse({"errors": {FIELD_OF.get(error.field or "", "__all__"): error.message}}, status=400)
    # torch (with the trainer) is loaded on the first such request, not by every web process
    from trainer.augment import preview  # torch: loaded only where this runs
    from trainer.dataset_folder import load_dataset_folder  # torch: loaded only where this runs
    from trainer.datum import DatumLMDB  # torch: loaded only where this runs

    db = DatumLMDB(load_dataset_folder(dataset.path).splits["train"].db)
    try:
        image, _ = db[0]
    finally:
        db.close()
    copies = preview(image, cfg)
    return JsonResponse({"images": [_png_url(copy) for copy in copies], "size": list(copies[0].shape[:2])})


def _png_url(array) -> str:
    return "data:image/png;base64," + base64.b64encode(to_png_bytes(array)).decode("ascii")


@require_GET
def placement(request):
    form = RunForm(request.GET, user=request.user, preview=True)
    subset = [
        "device_mode",
        "gpu_count",
        "gpus",
        "model_parallel",
        *(f for f in ("executor", "nodes") if f in form.fields),
    ]
    cleaned, errors = _clean_subset(form, subset)
    if errors:
        return JsonResponse({"errors": errors}, status=400)
    form.cleaned_data = cleaned
    if cleaned["device_mode"] == "specific" and not cleaned.get("gpus"):
        return JsonResponse({"errors": {"gpus": "Tick at least one GPU."}}, status=400)
    try:
        request_ = parse_device_request(form.gpus_request())
    except RequestError as error:
        return JsonResponse({"errors": {"device_mode": error.message}}, status=400)
    model_parallel = cleaned.get("model_parallel") or 1
    try:
        check_model_parallel(model_parallel, request_)
    except RequestError as error:
        return JsonResponse({"errors": {"model_parallel": error.message}}, status=400)
    try:
        executor, nodes = check_executor(cleaned.get("executor"), cleaned.get("nodes"), request_)
    except RequestError as error:
        return JsonResponse({"errors": {error.field: error.message}}, status=400)
    request_ = services.resolve_devices(request_, executor=executor)
    preview = executor_named(executor).placement_preview(user=request.user, request=request_, nodes=nodes)
    if model_parallel > 1:
        copies = request_.device_count // model_parallel
        preview["message"] += (
            f" The network is split over {model_parallel} GPUs per copy; "
            f"{copies} {'copy trains' if copies == 1 else 'copies train'} in data parallel."
        )
    return JsonResponse(preview)
