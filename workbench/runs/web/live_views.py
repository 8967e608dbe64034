"""The live run page, its series endpoints (range re-fetch, full-resolution downloads) and comparison."""

from __future__ import annotations

import csv
import json
import math

from django import forms
from django.conf import settings as django_settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from trainer import protocol
from workbench.core.numbers import MAX_ID, bounded_number
from workbench.core.task_table import task_row
from workbench.runs import series
from workbench.runs.models import Run
from workbench.runs.pretrained import weights_source_for
from workbench.runs.selectors import best_metric_of, held_at, run_best, run_for, runs_visible_to, weights_rule

MAX_REQUEST_POINTS = 20_000
COMPARE_MAX_RUNS = 12
# What the comparison chart can overlay, in the order the form lists them.
COMPARE_SERIES = [
    ("loss", "Training loss"),
    ("val_loss", "Validation loss"),
    ("top1", "Validation accuracy (top-1)"),
    ("top5", "Validation accuracy (top-5)"),
    ("map", "Detection mAP@[.5:.95]"),
    ("map_50", "Detection mAP50"),
    ("miou", "Segmentation mIoU"),
    ("pixel_accuracy", "Segmentation pixel accuracy"),
    ("lr", "Learning rate"),
    ("images_per_sec", "Throughput (images/s)"),
    ("data_wait_share", "Data-wait share"),
]
X_CHOICES = [("step", "Step"), ("epoch", "Epoch"), ("time", "Time since start"), ("images", "Images seen")]
# "All": a grid of the runs' charts, one per series some run has, as on the run page.
ALL_SERIES = "all"


def key_settings(run: Run) -> dict:
    config = run.config or {}
    solver = config.get("solver") or {}
    return {
        "network": run.network,
        "batch_size": config.get("batch_size"),
        "lr": solver.get("base_lr"),
        "optimizer": solver.get("optimizer"),
        "epochs": config.get("epochs"),
        "model_parallel": config.get("model_parallel") or 1,
    }


def early_stop_of(run: Run) -> dict | None:
    """Where a run ended by its early-stopping rule stopped, and the one best it kept (the
    trainer's final status says so: trainer/early_stop.py); None for any other run. The row's
    progress says 100 % once done: the page shows the share of the epochs that ran instead."""
    if run.state != Run.State.DONE:
        return None
    event = (
        run.events.filter(kind=protocol.STATUS, data__early_stopped=True).order_by("-seq").values_list("data", "epoch")
    ).first()
    if event is None:
        return None
    data, event_epoch = event
    epoch, epochs = data.get("stopped_epoch", event_epoch), data.get("epochs") or (run.config or {}).get("epochs")
    return {
        "epoch": epoch,
        "epochs": epochs,
        "progress": min(1.0, epoch / epochs) if epoch is not None and epochs else run.progress,
        "metric": data.get("best_metric") or best_metric_of(run),
        "best": data.get("best"),
        "best_epoch": data.get("best_epoch"),
        # Whose weights the kept checkpoint holds; a status written before issue 33 has none (the
        # average's, where the run kept one).
        "best_weights": held_at({"weights": data.get("best_weights")}, averaged=weights_rule(run)[0]),
    }


def run_label(run: Run) -> str:
    settings = key_settings(run)
    parts = [settings["network"]]
    if settings["batch_size"] is not None:
        parts.append(f"batch {settings['batch_size']}")
    if settings["lr"] is not None:
        parts.append(f"lr {settings['lr']:g}")
    if run.dataset_version_number > 1:  # a fixed dataset: the legend tells the runs of a retrain apart
        parts.append(f"dataset v{run.dataset_version_number}")
    return f"{run.name} (#{run.pk}: {', '.join(parts)})"


def _best_facts(run: Run) -> dict:
    """The best checkpoint's metric, whether the run keeps a weights' average and the weights its
    config forces (None: the better at each validation, trainer.protocol.checkpoint_weights; each
    validation event says which it took) and its best so far."""
    metric = best_metric_of(run)
    averaged, forced = weights_rule(run)
    return {
        "best_metric": metric,
        "best_averages": averaged,
        "best_forced": forced,
        "best_metric_higher": protocol.METRIC_DIRECTION[metric] == "max",
        "best": run_best(run),
    }


def running_seconds(run: Run) -> float:
    """The wall time the run has spent running, over all its attempts (start-up, data loading and
    validation included): from its timeline. The trainer's progress events count the training
    loop of the current attempt only, which is not what a finished run's "Elapsed" means."""
    total, since = 0.0, None
    for to_state, at in run.transitions.order_by("at", "pk").values_list("to_state", "at"):
        if since is not None:
            total += (at - since).total_seconds()
        since = at if to_state == Run.State.RUNNING else None
    if since is not None:  # running now
        total += (timezone.now() - since).total_seconds()
    return total


@login_required
def run_detail(request, pk: int):
    run = run_for(request.user, pk)
    early_stop = early_stop_of(run)
    page = {
        "id": run.pk,
        "name": run.name,
        "state": run.state,
        "progress": early_stop["progress"] if early_stop else run.progress,
        "early_stop": early_stop,
        **_best_facts(run),
        "task": run.dataset.task,
        "metric_chart": task_row(run.dataset.task).metric_chart,
        "elapsed_seconds": running_seconds(run),
        "eta_seconds": run.eta_seconds,
        "epochs": (run.config or {}).get("epochs"),
        "started_at": run.started_at.timestamp() if run.started_at else None,
        "finished_at": run.finished_at.timestamp() if run.finished_at else None,
        "socket_path": f"/ws/runs/{run.pk}/",
        "series_url": reverse("run-series", args=[run.pk]),
        "api_url": reverse("api-run", args=[run.pk]),
        "abort_url": reverse("api-run-abort", args=[run.pk]),
        "pause_url": reverse("api-run-pause", args=[run.pk]),
        "resume_url": reverse("api-run-resume", args=[run.pk]),
        "queue_url": reverse("api-queue"),
    }
    context = {
        "run": run,
        "page": page,
        "settings": key_settings(run),
        "devices": run.devices.select_related("host").order_by("kind", "index"),
        "transitions": run.transitions.all(),
        "weights_source": weights_source_for(request.user, run),
        # The dataset's latest version, when it is newer than the one the run trained on.
        "newer_version": run.dataset.versions.filter(number__gt=run.dataset_version_number).order_by("-number").first(),
        "slurm_partition": django_settings.SLURM_PARTITION,
    }
    return render(request, "runs/run_detail.html", context)


def _float_param(request, name: str) -> float | None:
    raw = request.GET.get(name, "")
    if raw == "":
        return None
    # NumberError is a ValueError: the caller answers 400.
    return bounded_number(raw, field=name, low=-math.inf, high=math.inf)


def _series_params(request) -> dict:
    """x, start, end and points from the query string; ValueError names the bad parameter."""
    x = request.GET.get("x", "step")
    if x not in series.X_AXES:
        raise ValueError(f"x must be one of {', '.join(series.X_AXES)}, not {x!r}")
    try:
        start, end = _float_param(request, "start"), _float_param(request, "end")
    except ValueError:
        raise ValueError("start and end must be numbers on the x axis") from None
    points = bounded_number(
        request.GET.get("points", series.MAX_POINTS), field="points", low=2, high=MAX_REQUEST_POINTS, integer=True
    )
    return {"x": x, "start": start, "end": end, "points": points}


def _names(request) -> list[str]:
    return [name for value in request.GET.getlist("name") for name in value.split(",") if name]


@require_GET
@login_required
def run_series(request, pk: int):
    """?name=loss&name=top1&x=step|epoch|time|images&start=&end=&points=: downsampled series."""
    run = run_for(request.user, pk)
    try:
        params = _series_params(request)
    except ValueError as error:
        return HttpResponseBadRequest(str(error))
    return JsonResponse(series.run_series(run, _names(request), **params))


def _download_name(run: Run, extension: str) -> str:
    return f'attachment; filename="run-{run.pk}-series.{extension}"'


class _Echo:
    def write(self, value: str) -> str:
        return value


@require_GET
@login_required
def run_series_csv(request, pk: int):
    """Every series event at full resolution, one row per event, one column per field."""
    run = run_for(request.user, pk)
    names = sorted(series.read_columns(run).names())
    writer = csv.writer(_Echo())

    def rows():
        yield writer.writerow(["seq", "kind", "step", "epoch", "time", "images_seen", *names])
        for kind, seq, step, epoch, time, images, fields in series.full_rows(run):
            values = [fields.get(name, "") for name in names]
            yield writer.writerow([seq, kind, _blank(step), _blank(epoch), time, _blank(images), *values])

    response = StreamingHttpResponse(rows(), content_type="text/csv")
    response["Content-Disposition"] = _download_name(run, "csv")
    return response


def _blank(value):
    return "" if value is None else value


@require_GET
@login_required
def run_series_json(request, pk: int):
    """Every series at full resolution, in the shape of the series endpoint (never downsampled)."""
    run = run_for(request.user, pk)
    data = series.run_series(run, points=2**62)
    data.update(name=run.name, settings=key_settings(run))
    response = HttpResponse(json.dumps(data, separators=(",", ":")), content_type="application/json")
    response["Content-Disposition"] = _download_name(run, "json")
    return response


class CompareForm(forms.Form):
    runs = forms.ModelMultipleChoiceField(queryset=Run.objects.none(), widget=forms.CheckboxSelectMultiple)
    name = forms.ChoiceField(
        choices=[(ALL_SERIES, "All charts (a grid)"), *COMPARE_SERIES],
        initial=ALL_SERIES,
        label="Series",
        required=False,
    )
    x = forms.ChoiceField(choices=X_CHOICES, initial="step", label="X axis", required=False)

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["runs"].queryset = runs_visible_to(user)
        self.fields["runs"].label_from_instance = run_label

    def clean_runs(self):
        runs = self.cleaned_data["runs"]
        if len(runs) > COMPARE_MAX_RUNS:
            raise forms.ValidationError(f"choose at most {COMPARE_MAX_RUNS} runs, not {len(runs)}")
        return runs

    def clean_name(self):
        return self.cleaned_data["name"] or ALL_SERIES

    def clean_x(self):
        return self.cleaned_data["x"] or "step"


def _split_runs(query):
    """`runs=1&runs=2` and `runs=1,2` (the runs list's links) mean the same."""
    query = query.copy()
    query.setlist("runs", [value for raw in query.getlist("runs") for value in raw.split(",") if value])
    return query


@login_required
def run_compare(request):
    form = CompareForm(_split_runs(request.GET) if request.GET else None, user=request.user)
    # Oldest first: the legend and the colours keep their order as runs are added.
    selected = sorted(form.cleaned_data["runs"], key=lambda run: run.pk) if form.is_valid() else []
    name = form.cleaned_data["name"] if selected else ALL_SERIES
    page = {
        "series_url": reverse("run-compare-series"),
        "runs": [run.pk for run in selected],
        # The grid asks for every series and draws those some run has.
        "names": [key for key, _ in COMPARE_SERIES] if name == ALL_SERIES else [name],
        "x": form.cleaned_data["x"] if selected else "step",
        "labels": dict(COMPARE_SERIES),
    }
    return render(request, "runs/compare.html", {"form": form, "selected": selected, "page": page})


@require_GET
@login_required
def run_compare_series(request):
    """?runs=1,2&name=loss&x=step: one series of several runs, each labelled with its key settings;
    `name=loss,top1` gives several, each run's under `series_by_name` (`series` is the first's)."""
    try:
        ids = [
            bounded_number(value, field="runs", low=1, high=MAX_ID, integer=True)
            for raw in request.GET.getlist("runs")
            for value in raw.split(",")
            if value
        ]
        params = _series_params(request)
    except ValueError as error:
        return HttpResponseBadRequest(str(error))
    names = [value for value in request.GET.get("name", "loss").split(",") if value][: len(COMPARE_SERIES)] or ["loss"]
    name = names[0]
    if not ids or len(ids) > COMPARE_MAX_RUNS:
        return HttpResponseBadRequest(f"runs: give 1 to {COMPARE_MAX_RUNS} run ids")
    runs = {run.pk: run for run in runs_visible_to(request.user).filter(pk__in=ids)}
    missing = [pk for pk in ids if pk not in runs]
    if missing:
        return JsonResponse({"detail": f"no run {missing[0]} of yours"}, status=404)
    answer = []
    for pk in ids:
        run = runs[pk]
        data = series.run_series(run, names, **params)
        answer.append(
            {
                "id": pk,
                "name": run.name,
                "state": run.state,
                "label": run_label(run),
                "settings": key_settings(run),
                "url": reverse("run-detail", args=[pk]),
                "last_seq": data["last_seq"],
                "series": data["series"].get(name),
                "series_by_name": {key: data["series"].get(key) for key in names},
            }
        )
    return JsonResponse({"name": name, "x": params["x"], "runs": answer})
