"""Pages of inference on a run: classify, test, a job's results, look inside, export."""

from __future__ import annotations

from django.contrib import messages
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from workbench.core.adapters import add_form_errors
from workbench.core.task_table import TASK_TABLE, task_row
from workbench.inference import networks, services
from workbench.inference.api import csv_response
from workbench.inference.exports import EXPORT_FORMATS
from workbench.inference.forms import JobForm
from workbench.inference.models import InferenceJob
from workbench.inference.selectors import jobs_visible_to
from workbench.runs.models import Run
from workbench.runs.selectors import run_for

# The page each kind of job is started from (a deleted job's page sends its user back there).
JOB_PAGES = {row.action: row.page for row in TASK_TABLE.values()} | {InferenceJob.Kind.TEST: "inference-test"}
FORMAT_LABELS = {"bundle": "Bundle (PyTorch weights)", "torchscript": "TorchScript", "onnx": "ONNX"}


def _job_page(request, run: Run, kind: str, template: str, **extra):
    checkpoints = services.checkpoint_choices(run=run)
    task = task_row(run.dataset.task)
    # A detector or segmentation network is tested on its dataset's splits, whose boxes or masks are known.
    uploads = kind != InferenceJob.Kind.TEST or task.tests_uploads
    splits = run.dataset.splits or {}
    form = JobForm(
        request.POST or None, request.FILES or None, checkpoints=checkpoints, kind=kind, splits=splits, uploads=uploads
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            job = services.job_create(
                owner=request.user,
                run=run,
                kind=kind,
                checkpoint=data["checkpoint"],
                source=data["source"],
                archive=data.get("archive"),
                files=data.get("images") or [],
            )
        except services.InferenceError as error:
            add_form_errors(form, error)
        else:
            return redirect("inference-job", run.pk, job.pk)
    jobs = jobs_visible_to(request.user).filter(run=run, kind=kind)[:20]
    context = {"run": run, "task": task, "form": form, "checkpoints": checkpoints, "jobs": jobs, **extra}
    return render(request, template, context)


def classify_page(request, pk: int):
    run = run_for(request.user, pk)
    return _job_page(request, run, InferenceJob.Kind.CLASSIFY, "inference/classify.html")


def detect_page(request, pk: int):
    run = run_for(request.user, pk)
    api = reverse("api-run-detect", args=[run.pk])
    return _job_page(
        request, run, InferenceJob.Kind.DETECT, "inference/detect.html", action="detect", title="Detect", api=api
    )


def segment_page(request, pk: int):
    run = run_for(request.user, pk)
    api = reverse("api-run-segment", args=[run.pk])
    return _job_page(
        request, run, InferenceJob.Kind.SEGMENT, "inference/segment.html", action="segment", title="Segment", api=api
    )


def test_page(request, pk: int):
    run = run_for(request.user, pk)
    return _job_page(request, run, InferenceJob.Kind.TEST, "inference/test.html")


def _get_job(request, pk: int, job_pk: int) -> InferenceJob:
    job = get_object_or_404(jobs_visible_to(request.user).select_related("run__dataset"), pk=job_pk, run_id=pk)
    return services.job_check_stale(job=job)


def job_page(request, pk: int, job_pk: int):
    job = _get_job(request, pk, job_pk)
    # A detector's or segmentation network's jobs and tests have their own page (and its module).
    task = task_row(job.run.dataset.task)
    return render(request, task.job_template, {"run": job.run, "task": task, "job": job})


def job_csv(request, pk: int, job_pk: int):
    return csv_response(_get_job(request, pk, job_pk))


def _job_image(request, pk: int, job_pk: int, folder: str, name: str) -> FileResponse:
    job = _get_job(request, pk, job_pk)
    path = job.folder / "out" / folder / name
    if not path.is_file():
        raise Http404("no such image")
    return FileResponse(path.open("rb"), content_type="image/png")


def job_mistake(request, pk: int, job_pk: int, index: int):
    return _job_image(request, pk, job_pk, "mistakes", f"{index}.png")


def job_thumb(request, pk: int, job_pk: int, index: int):
    """The thumbnail of one image of a classify-many job."""
    return _job_image(request, pk, job_pk, "thumbs", f"{index}.png")


def job_top(request, pk: int, job_pk: int, label: int, rank: int):
    """One image of the test's "Top N per category" gallery."""
    return _job_image(request, pk, job_pk, "top", f"{label}_{rank}.png")


def job_worst(request, pk: int, job_pk: int, rank: int):
    """One of a detection or segmentation test's worst images: ground truth beside prediction."""
    return _job_image(request, pk, job_pk, "worst", f"{rank}.png")


def job_mask(request, pk: int, job_pk: int, index: int):
    """The colour mask of one image of a segment-many job."""
    return _job_image(request, pk, job_pk, "masks", f"{index}.png")


@require_POST
def job_delete(request, pk: int, job_pk: int):
    job = _get_job(request, pk, job_pk)
    if job.is_active:
        messages.error(request, f"Job {job.pk} is {job.state}; wait for it to end.")
        return redirect("inference-job", pk, job.pk)
    kind = job.kind
    services.job_delete(job=job)
    messages.success(request, f"Job {job_pk} deleted.")
    return redirect(JOB_PAGES[kind], pk)


def inside_page(request, pk: int):
    run = run_for(request.user, pk)
    layers, default = [], []
    checkpoints = services.checkpoint_choices(run=run)
    if checkpoints:
        try:
            layers, default = services.checkpoint_layers(run=run)
        except (services.InferenceError, OSError, ValueError, KeyError) as error:
            messages.error(request, f"The checkpoint cannot be loaded: {error}")
    return render(
        request,
        "inference/inside.html",
        {"run": run, "checkpoints": checkpoints, "layers": layers, "default_layers": default},
    )


def export_page(request, pk: int):
    run = run_for(request.user, pk)
    checkpoints = services.checkpoint_choices(run=run)
    notes = networks.export_notes(run=run) if checkpoints else {}
    formats = [{"value": fmt, "label": FORMAT_LABELS[fmt], **notes.get(fmt, {})} for fmt in EXPORT_FORMATS]
    context = {"run": run, "task": task_row(run.dataset.task), "checkpoints": checkpoints, "formats": formats}
    return render(request, "inference/export.html", context)
