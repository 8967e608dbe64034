"""Pages of inference on a run: classify, test, a job's results, look inside, export."""

from __future__ import annotations

from django.contrib import messages
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from workbench.inference import networks, services
from workbench.inference.api import csv_response
from workbench.inference.exports import EXPORT_FORMATS
from workbench.inference.forms import JobForm
from workbench.inference.models import InferenceJob
from workbench.inference.selectors import jobs_visible_to
from workbench.runs.models import Run
from workbench.runs.selectors import run_for
from workbench.runs.validators import add_form_errors

FORMAT_LABELS = {"bundle": "Bundle (PyTorch weights)", "torchscript": "TorchScript", "onnx": "ONNX"}


def _job_page(request, run: Run, kind: str, template: str):
    checkpoints = services.checkpoint_choices(run=run)
    form = JobForm(
        request.POST or None, request.FILES or None, checkpoints=checkpoints, kind=kind, splits=run.dataset.splits or {}
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
    context = {"run": run, "form": form, "checkpoints": checkpoints, "jobs": jobs}
    return render(request, template, context)


def classify_page(request, pk: int):
    run = run_for(request.user, pk)
    return _job_page(request, run, InferenceJob.Kind.CLASSIFY, "inference/classify.html")


def test_page(request, pk: int):
    run = run_for(request.user, pk)
    return _job_page(request, run, InferenceJob.Kind.TEST, "inference/test.html")


def _get_job(request, pk: int, job_pk: int) -> InferenceJob:
    job = get_object_or_404(jobs_visible_to(request.user).select_related("run__dataset"), pk=job_pk, run_id=pk)
    return services.job_check_stale(job=job)


def job_page(request, pk: int, job_pk: int):
    job = _get_job(request, pk, job_pk)
    return render(request, "inference/job.html", {"run": job.run, "job": job})


def job_csv(request, pk: int, job_pk: int):
    return csv_response(_get_job(request, pk, job_pk))


def job_mistake(request, pk: int, job_pk: int, index: int):
    job = _get_job(request, pk, job_pk)
    path = job.folder / "out" / "mistakes" / f"{index}.png"
    if not path.is_file():
        raise Http404("no such image")
    return FileResponse(path.open("rb"), content_type="image/png")


def job_top(request, pk: int, job_pk: int, label: int, rank: int):
    """One image of the test's "Top N per category" gallery."""
    job = _get_job(request, pk, job_pk)
    path = job.folder / "out" / "top" / f"{label}_{rank}.png"
    if not path.is_file():
        raise Http404("no such image")
    return FileResponse(path.open("rb"), content_type="image/png")


@require_POST
def job_delete(request, pk: int, job_pk: int):
    job = _get_job(request, pk, job_pk)
    if job.is_active:
        messages.error(request, f"Job {job.pk} is {job.state}; wait for it to end.")
        return redirect("inference-job", pk, job.pk)
    kind = job.kind
    services.job_delete(job=job)
    messages.success(request, f"Job {job_pk} deleted.")
    return redirect("inference-test" if kind == InferenceJob.Kind.TEST else "inference-classify", pk)


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
    try:
        services.check_classification_run(run=run, what="exports")
    except services.InferenceError as error:
        # Said before anything is built: a detector's or segmentation network's exports are to come.
        return render(request, "inference/export.html", {"run": run, "not_exportable": error.message})
    checkpoints = services.checkpoint_choices(run=run)
    notes = networks.export_notes(run=run) if checkpoints else {}
    formats = [{"value": fmt, "label": FORMAT_LABELS[fmt], **notes.get(fmt, {})} for fmt in EXPORT_FORMATS]
    return render(request, "inference/export.html", {"run": run, "checkpoints": checkpoints, "formats": formats})
