from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from workbench.runs.models import Run
from workbench.runs.scheduler import queue_positions
from workbench.runs.services import queue_scheduling

FILTERS = ("state", "network", "dataset")


def _runs_for(user):
    runs = Run.objects.select_related("owner", "dataset").prefetch_related("devices__host")
    return runs if user.is_staff else runs.filter(owner=user)


def run_list(request):
    runs = _runs_for(request.user)
    chosen = {name: request.GET.get(name, "") for name in (*FILTERS, "owner")}
    if chosen["state"]:
        runs = runs.filter(state=chosen["state"])
    if chosen["network"]:
        runs = runs.filter(network=chosen["network"])
    if chosen["dataset"].isdigit():
        runs = runs.filter(dataset_id=int(chosen["dataset"]))
    if chosen["owner"] and request.user.is_staff:
        runs = runs.filter(owner__username=chosen["owner"])
    everything = _runs_for(request.user)
    context = {
        "runs": runs[:200],
        "chosen": chosen,
        "states": Run.State.values,
        "networks": sorted(set(everything.values_list("network", flat=True))),
        "datasets": sorted(set(everything.values_list("dataset_id", "dataset__name")), key=lambda d: d[1]),
    }
    return render(request, "runs/run_list.html", context)


def queue(request):
    rows = [
        {"position": position, "run": run, "visible": run.owner_id == request.user.pk or request.user.is_staff}
        for position, run in enumerate(queue_positions(), start=1)
    ]
    return render(request, "runs/queue.html", {"rows": rows})


@staff_member_required
@require_POST
def run_priority(request, pk: int):
    run = get_object_or_404(Run, pk=pk)
    try:
        priority = int(request.POST.get("priority", ""))
    except ValueError:
        messages.error(request, "Priority must be a whole number.")
        return redirect("run-queue")
    if not -100 <= priority <= 100:
        messages.error(request, "Priority must be between -100 and 100.")
        return redirect("run-queue")
    Run.objects.filter(pk=run.pk).update(priority=priority)
    queue_scheduling()
    messages.success(request, f"{run.name}: priority {priority}.")
    return redirect("run-queue")
