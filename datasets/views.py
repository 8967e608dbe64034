from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.db import transaction
from django.http import FileResponse, Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from datasets.archives import ArchiveError
from datasets.doctor.checks import duplicates_for_page
from datasets.forms import DatasetForm
from datasets.labels import LabelError
from datasets.labels.registry import format_choices, reads_label_files
from datasets.models import Dataset
from datasets.preview import cap_proposal, resize_preview
from datasets.selectors import (
    dataset_for,
    dataset_labels,
    dataset_runs_for,
    dataset_to_change,
    datasets_visible_to,
    version_of,
    versions_of,
)
from datasets.services import (
    DatasetInUse,
    VersionInUse,
    dataset_cancel,
    dataset_create,
    dataset_delete,
    dataset_rebuild,
    dataset_skipped,
    duplicates_check,
    version_delete,
    version_drop_leaks,
)
from datasets.sources import SourceError
from datasets.validators import allowed_roots_text, resize_modes_by_task, resize_modes_for
from workbench.core.adapters import page_message
from workbench.core.errors import RequestError
from workbench.projects.selectors import filtered_by_query

SKIPPED_ON_PAGE = 500


def _source_words(dataset: Dataset) -> str:
    """What the source is, in words: a folder of KITTI labels is no "folder of class folders"
    (the kind's own words, which hold for a classifier's folder only)."""
    if not reads_label_files(dataset.task):
        return dataset.get_kind_display()
    where = "Archive" if dataset.kind == Dataset.Kind.ARCHIVE else "Folder"
    labels = dict(format_choices()).get((dataset.source or {}).get("format"))
    return f"{where} of images and labels" + (f", {labels}" if labels else "")


@require_GET
def dataset_list(request):
    rows = filtered_by_query(datasets_visible_to(request.user), request.user, request.GET)
    datasets = list(rows.select_related("project")[:200])
    for dataset in datasets:
        dataset.source_words = _source_words(dataset)
    filtered = any(request.GET.get(name) for name in ("project", "shared"))
    return render(request, "datasets/dataset_list.html", {"datasets": datasets, "filtered": filtered})


def _wizard_context(form) -> dict:
    uploaded = getattr(form, "cleaned_data", {}).get("upload")
    return {
        "form": form,
        "import_roots": allowed_roots_text(),
        "max_upload_bytes": settings.MAX_UPLOAD_BYTES,
        "max_side": settings.MAX_IMAGE_SIDE,
        # The validator's rule, so the page offers only what the form will take.
        "resize_modes": resize_modes_by_task(),
        # A refused form keeps its upload (the hidden token); the page says so by name.
        "uploaded_name": uploaded.name if uploaded else "",
    }


def _preview_refusal(form) -> JsonResponse:
    """The form's errors by field, and the task when it was known (given or detected), so the page
    can offer that task's resize modes even when the refusal is the mode itself."""
    answer: dict = {"errors": {field: [str(e) for e in errs] for field, errs in form.errors.items()}}
    task = getattr(form, "cleaned_data", {}).get("task")
    if task and task != "auto":
        answer.update(task=task, resize_modes=list(resize_modes_for(task)))
    return JsonResponse(answer, status=400)


@require_http_methods(["GET", "POST"])
def dataset_new(request):
    form = DatasetForm(request.POST if request.method == "POST" else None, user=request.user)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            dataset = dataset_create(
                owner=request.user,
                name=form.cleaned_data["name"],
                kind=form.cleaned_data["kind"],
                source=form.source(),
                options=form.options(),
            )
        messages.success(request, f"Dataset “{dataset.name}” is queued for building.")
        return redirect("dataset-detail", pk=dataset.pk)
    return render(request, "datasets/dataset_new.html", _wizard_context(form), status=400 if form.errors else 200)


@require_POST
def dataset_preview(request):
    """The wizard's preview: JSON with the first image before and after resizing."""
    data = request.POST.copy()
    if not data.get("name"):
        data["name"] = "preview"  # the name is chosen on the last step
    form = DatasetForm(data, user=request.user)
    if not form.is_valid():
        return _preview_refusal(form)
    c = form.cleaned_data
    try:
        preview = resize_preview(
            kind=c["kind"],
            path=c["upload"] or c["source_path"],
            width=c["image_width"],
            height=c["image_height"],
            channels=c["channels"],
            resize_mode=c["resize_mode"],
            labels_path=c.get("labels_path"),
            image_folder=c.get("image_folder"),
            allowed_roots=settings.IMPORT_ROOTS,
        )
    except (SourceError, ArchiveError) as exc:
        return JsonResponse({"errors": {"__all__": [str(exc)]}}, status=400)
    preview.update(kind=c["kind"], width=c["image_width"], height=c["image_height"], resize_mode=c["resize_mode"])
    preview["classes"] = c.get("classes")
    preview["task"], preview["format"] = c["task"], c["format"]
    preview["resize_modes"] = list(resize_modes_for(c["task"]))
    if "modes" in preview:  # only the modes the task takes are shown to choose from
        preview["modes"] = {mode: preview["modes"][mode] for mode in preview["resize_modes"]}
    try:
        preview["label_check"] = form.label_check()  # detection, segmentation: classes and problems
    except (LabelError, ArchiveError) as exc:
        return JsonResponse({"errors": {"format": [str(exc)]}}, status=400)
    if proposed := preview.get("proposed"):  # the largest side a dataset may have holds here too
        cap_proposal(proposed, settings.MAX_IMAGE_SIDE)
    return JsonResponse(preview)


@require_GET
def dataset_detail(request, pk: int):
    dataset = dataset_for(request.user, pk)
    rows = dataset.class_counts()
    chart = {
        "labels": [r["name"] for r in rows],
        "splits": {s: [r[s] for r in rows] for s in ("train", "val", "test") if s in (dataset.splits or {})},
    }
    skipped = dataset_skipped(dataset=dataset, limit=SKIPPED_ON_PAGE)
    context = {
        "dataset": dataset,
        "rows": rows,
        "chart": chart,
        "split_names": [s for s in ("train", "val", "test") if s in (dataset.splits or {})],
        "skipped": skipped,
        "skipped_more": max(dataset.skipped_count - len(skipped), 0),
        "runs": dataset_runs_for(dataset, request.user, limit=100),
        "has_mean": (dataset.path / "mean.png").is_file() and dataset.status == Dataset.Status.READY,
        # Detection and segmentation: the stored label check and statistics (None for a classifier).
        "label_data": dataset_labels(dataset) if reads_label_files(dataset.task) else None,
        "counts_title": dataset.task_row.counts_title,
        "source_words": _source_words(dataset),
        "duplicates": duplicates_for_page(dataset),
        "versions": versions_of(dataset),
    }
    return render(request, "datasets/dataset_detail.html", context)


@require_GET
def dataset_mean(request, pk: int):
    dataset = dataset_for(request.user, pk)
    path = dataset.path / "mean.png"
    if dataset.status != Dataset.Status.READY or not path.is_file():
        raise Http404("No mean image")
    return FileResponse(open(path, "rb"), content_type="image/png")


@require_GET
def dataset_skipped_download(request, pk: int):
    dataset = dataset_for(request.user, pk)
    items = dataset_skipped(dataset=dataset)
    response = JsonResponse(items, safe=False, json_dumps_params={"indent": 1, "ensure_ascii": False})
    response["Content-Disposition"] = f'attachment; filename="dataset-{dataset.pk}-skipped.json"'
    return response


@require_POST
def dataset_cancel_view(request, pk: int):
    dataset = dataset_to_change(request.user, pk)
    if dataset_cancel(dataset=dataset):
        messages.success(request, "The build was cancelled; nothing half-built is kept.")
    else:
        messages.error(request, f"Only a pending or building dataset can be cancelled; this one is {dataset.status}.")
    return redirect("dataset-detail", pk=dataset.pk)


@require_POST
def dataset_rebuild_view(request, pk: int):
    dataset = dataset_to_change(request.user, pk)
    with transaction.atomic():
        rebuilt = dataset_rebuild(dataset=dataset)
    if rebuilt:
        messages.success(request, "The dataset is queued for building again.")
    else:
        messages.error(request, f"Only a failed or cancelled dataset can be rebuilt; this one is {dataset.status}.")
    return redirect("dataset-detail", pk=dataset.pk)


@require_http_methods(["GET", "POST"])
def dataset_delete_view(request, pk: int):
    dataset = dataset_to_change(request.user, pk)
    runs = dataset_runs_for(dataset, request.user)
    if request.method == "POST" and not runs:
        try:
            dataset_delete(dataset=dataset)
        except DatasetInUse:
            runs = dataset_runs_for(dataset, request.user)
        else:
            messages.success(request, f"Dataset “{dataset.name}” was deleted.")
            return redirect("dataset-list")
    status = 409 if (request.method == "POST" and runs) else 200
    return render(request, "datasets/dataset_delete.html", {"dataset": dataset, "runs": runs}, status=status)


@require_POST
def dataset_duplicates_check_view(request, pk: int):
    dataset = dataset_for(request.user, pk)
    try:
        asked = duplicates_check(dataset=dataset, by=request.user)
    except RequestError as error:
        messages.error(request, page_message(error))
        return redirect("dataset-detail", pk=dataset.pk)
    if asked:
        messages.success(request, "A worker checks the dataset for duplicates and leaks; the report appears here.")
    else:
        messages.info(request, "The dataset is being checked already.")
    return redirect("dataset-detail", pk=dataset.pk)


@require_POST
def dataset_drop_leaks_view(request, pk: int):
    dataset = dataset_to_change(request.user, pk)
    try:
        version = version_drop_leaks(dataset=dataset, by=request.user)
    except RequestError as error:
        messages.error(request, page_message(error))
    else:
        messages.success(request, f"Version {version.number} made: {version.note}. New runs train on it.")
    return redirect("dataset-detail", pk=dataset.pk)


@require_POST
def dataset_version_delete_view(request, pk: int, number: int):
    dataset = dataset_to_change(request.user, pk)
    try:
        version_delete(dataset=dataset, version=version_of(dataset, number), by=request.user)
    except RequestError as error:
        messages.error(request, page_message(error))
    except VersionInUse as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Version {number} was deleted.")
    return redirect("dataset-detail", pk=dataset.pk)
