"""Run management: rename and notes, delete (asks first; refuses while running), abort, bulk
abort/delete, and the metric summaries (last/best loss and the task's headline metric, sparkline) of the runs list."""

from __future__ import annotations

from django.contrib import messages
from django.core.cache import cache
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from trainer import protocol
from workbench.core.adapters import page_message
from workbench.core.errors import RequestError
from workbench.core.ownership import refusal_words
from workbench.runs import services
from workbench.runs.models import Run, RunEvent
from workbench.runs.selectors import held_at, run_for, run_to_change, runs_visible_to, weights_rule
from workbench.runs.web.forms import RunEditForm

SPARK_POINTS = 40
SPARK_WIDTH, SPARK_HEIGHT = 120, 28


def _back(request, fallback: str = "run-list"):
    target = request.POST.get("next") or request.GET.get("next") or ""
    safe = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return redirect(target if target and safe else reverse(fallback))


# ----------------------------------------------------------------------------- summaries


def _bucket_means(values: list[float], count: int) -> list[float]:
    if len(values) <= count:
        return values
    size = len(values) / count
    return [
        sum(chunk) / len(chunk)
        for i in range(count)
        if (chunk := values[int(i * size) : max(int((i + 1) * size), int(i * size) + 1)])
    ]


def sparkline_points(values: list[float]) -> str:
    """SVG polyline points for a small loss curve (y flipped: lower loss is lower on the line)."""
    values = _bucket_means([v for v in values if v is not None], SPARK_POINTS)
    if len(values) < 2:
        return ""
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    step = SPARK_WIDTH / (len(values) - 1)
    return " ".join(
        f"{i * step:.1f},{SPARK_HEIGHT - 2 - (v - low) / span * (SPARK_HEIGHT - 4):.1f}" for i, v in enumerate(values)
    )


def _train_losses(run_id: int) -> list[float]:
    events = RunEvent.objects.filter(run_id=run_id, kind=protocol.METRICS).order_by("seq")
    return [loss for loss in events.values_list("data__loss", flat=True) if isinstance(loss, int | float)]


def run_summary(run: Run) -> dict:
    """Last and best loss and headline metric of a run, and its sparkline; cached until a new
    event. The headline is the task's first metric (trainer.protocol.TASK_METRICS: top-1, mAP,
    mIoU), so a detector's column is its mAP, not a classifier's top-1 it never reports."""
    # "v3": summaries cached before the headline was the task's lack its name (v1), or say whose
    # weights without the better-of rule (v2).
    key = f"run-summary-v3:{run.pk}:{run.last_seq}"
    summary = cache.get(key)
    if summary is not None:
        return summary
    losses = _train_losses(run.pk)
    headline = protocol.TASK_METRICS[run.dataset.task or protocol.CLASSIFICATION][0]
    # Each validation of the weights its checkpoint holds (selectors.held_at: the raw weights or
    # their average, whichever the run's best metric chose there), as the run page's best.
    averaged, forced = weights_rule(run)
    validations = []
    rows = RunEvent.objects.filter(run_id=run.pk, kind=protocol.VALIDATION).order_by("seq")
    for data in rows.values_list("data", flat=True):
        held = held_at(data, averaged=averaged) == protocol.AVERAGE
        validations.append([data.get(protocol.checkpoint_series(key, averaged=held)) for key in ("val_loss", headline)])
    val_losses = [v for v, _ in validations if isinstance(v, int | float)]
    values = [a for _, a in validations if isinstance(a, int | float)]
    best = max if protocol.METRIC_DIRECTION[headline] == "max" else min
    summary = {
        "last_loss": losses[-1] if losses else None,
        "best_loss": min(losses) if losses else None,
        "last_val_loss": val_losses[-1] if val_losses else None,
        "best_val_loss": min(val_losses) if val_losses else None,
        "metric": headline,
        "last_metric": values[-1] if values else None,
        "best_metric": best(values) if values else None,
        "sparkline": sparkline_points(losses),
        # Whose validations these are where the run keeps an average (issue 33): "EMA" or "raw
        # weights" when its config forces one, else each validation's better of the two.
        "weights_note": (protocol.WEIGHTS_WORDS[forced] if forced else "raw or EMA") if averaged else None,
    }
    cache.set(key, summary, 24 * 3600)
    return summary


# ----------------------------------------------------------------------------- one run


def run_edit(request, pk: int):
    run = run_to_change(request.user, pk)
    form = RunEditForm(request.POST or None, instance=run)
    if request.method == "POST" and form.is_valid():
        Run.objects.filter(pk=run.pk).update(name=form.cleaned_data["name"], notes=form.cleaned_data["notes"])
        messages.success(request, f"Run #{run.pk} saved.")
        return _back(request)
    return render(request, "runs/run_edit.html", {"run": run, "form": form})


def run_delete(request, pk: int):
    run = run_to_change(request.user, pk)
    if request.method == "POST":
        try:
            services.run_delete(run=run)
        except services.RunError as error:
            messages.error(request, f"{error}.")
            return redirect("run-delete", run.pk)
        messages.success(request, f"Run #{pk} {run.name} deleted.")
        return redirect("run-list")
    return render(request, "runs/run_delete.html", {"runs": [run], "single": True})


@require_POST
def run_abort(request, pk: int):
    run = run_to_change(request.user, pk)
    try:
        services.run_abort(run=run)
    except services.RunError as error:
        messages.error(request, f"{error}.")
    else:
        messages.success(request, f"Run #{run.pk} {run.name}: abort requested.")
    return _back(request)


@require_POST
def run_retrain(request, pk: int):
    """The run again on its dataset's latest version (or the `version` posted); then both compared."""
    run = run_for(request.user, pk)
    wanted = request.POST.get("version", "")
    versions = run.dataset.versions.order_by("-number")
    version = versions.filter(number=int(wanted)).first() if wanted.isdigit() else versions.first()
    if version is None:
        messages.error(request, f"Dataset {run.dataset.name!r} has no version {wanted or 'to train on'}.")
        return redirect("run-detail", pk=run.pk)
    try:
        again = services.run_retrain(run=run, by=request.user, version=version)
    except RequestError as error:
        messages.error(request, page_message(error))
        return redirect("run-detail", pk=run.pk)
    messages.success(request, f"Run #{again.pk} trains {run.name!r}'s settings on version {version.number}.")
    return redirect(f"{reverse('run-compare')}?runs={run.pk},{again.pk}")


# ----------------------------------------------------------------------------- many runs


def _ticked_to_change(request) -> list[Run]:
    """The ticked runs the user may change; each other one they see is refused with why (a
    viewer's tick on a project's run), and ticking none says so."""
    ids = [int(value) for value in request.POST.getlist("ids") if value.isdigit()]
    ticked = list(runs_visible_to(request.user).filter(pk__in=ids))
    if not ticked:
        messages.error(request, "Tick at least one run first.")
    runs = [run for run in ticked if run.is_changeable_by(request.user)]
    for run in ticked:
        if run not in runs:
            messages.error(request, f"Run #{run.pk}: {refusal_words(run, request.user, noun='run')}.")
    return runs


@require_POST
def run_bulk(request):
    """Abort or delete the ticked runs; delete shows the list and asks before it acts."""
    runs = _ticked_to_change(request)
    action = request.POST.get("action", "")
    if not runs:
        return _back(request)
    if action == "abort":
        done, refused = [], []
        for run in runs:
            try:
                services.run_abort(run=run)
                done.append(run)
            except services.RunError as error:
                refused.append(str(error))
        if done:
            messages.success(request, f"Abort requested for {len(done)} run(s).")
        for reason in refused:
            messages.error(request, f"{reason}.")
        return _back(request)
    if action == "delete":
        if request.POST.get("confirmed") != "yes":
            return render(
                request, "runs/run_delete.html", {"runs": runs, "single": False, "next": request.POST.get("next", "")}
            )
        deleted, refused = 0, []
        for run in runs:
            try:
                services.run_delete(run=run)
                deleted += 1
            except services.RunError as error:
                refused.append(str(error))
        if deleted:
            messages.success(request, f"{deleted} run(s) deleted.")
        for reason in refused:
            messages.error(request, f"{reason}.")
        return _back(request)
    messages.error(request, f"Unknown action {action!r}: choose abort or delete.")
    return _back(request)
