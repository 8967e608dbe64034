from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from workbench.core.errors import RequestError
from workbench.projects.selectors import filtered_by_query
from workbench.runs.models import Run
from workbench.runs.scheduler import queue_for
from workbench.runs.selectors import runs_visible_to
from workbench.runs.services import queue_scheduling
from workbench.runs.validators import check_priority
from workbench.runs.web.manage_views import run_summary

FILTERS = ("state", "network", "dataset")
# Every parameter that narrows the list: the form's, and the project links' (projects/_sharing_filter.html).
NARROWING = (*FILTERS, "owner", "sweep", "project", "shared")


SORTS = {
    "-created": lambda run, summary: run.created_at,
    "name": lambda run, summary: run.name.lower(),
    "state": lambda run, summary: run.state,
    # The best of each run's headline metric (its task's: top-1, mAP, mIoU), every one a fraction.
    "-accuracy": lambda run, summary: summary["best_metric"] if summary["best_metric"] is not None else -1,
    "loss": lambda run, summary: summary["last_loss"] if summary["last_loss"] is not None else float("inf"),
}


def _narrowed(request, chosen: dict) -> QuerySet[Run]:
    """The runs the user may see, narrowed by the list's filters, its project ones included
    (`?project=<slug>`, `?shared=1`: projects.selectors.filtered_by_query)."""
    runs = filtered_by_query(runs_visible_to(request.user), request.user, request.GET)
    if chosen["state"]:
        runs = runs.filter(state=chosen["state"])
    if chosen["network"]:
        runs = runs.filter(network=chosen["network"])
    if chosen["dataset"].isdigit():
        runs = runs.filter(dataset_id=int(chosen["dataset"]))
    if chosen["owner"] and request.user.is_staff:
        runs = runs.filter(owner__username=chosen["owner"])
    if chosen["sweep"]:
        runs = runs.filter(sweep=chosen["sweep"])
    return runs.select_related("project").prefetch_related("devices__host")


def run_list(request):
    chosen = {name: request.GET.get(name, "") for name in (*NARROWING, "sort", "group")}
    rows = [(run, run_summary(run)) for run in _narrowed(request, chosen)[:200]]
    sort = chosen["sort"] if chosen["sort"] in SORTS else "-created"
    rows.sort(key=lambda row: SORTS[sort](*row), reverse=sort.startswith("-"))
    groups = [{"sweep": "", "rows": rows}]
    if chosen["group"] == "sweep":
        by_sweep: dict[str, list] = {}
        for row in rows:
            by_sweep.setdefault(row[0].sweep, []).append(row)
        groups = [
            {"sweep": sweep, "rows": members, "ids": ",".join(str(run.pk) for run, _ in members)}
            for sweep, members in sorted(by_sweep.items(), key=lambda item: (item[0] == "", item[0]))
        ]
    everything = runs_visible_to(request.user).prefetch_related("devices__host")
    context = {
        "runs": [run for run, _ in rows],
        "groups": groups,
        "chosen": chosen,
        "sort": sort,
        "states": Run.State.values,
        "networks": sorted(set(everything.values_list("network", flat=True))),
        "datasets": sorted(set(everything.values_list("dataset_id", "dataset__name")), key=lambda d: d[1]),
        "sweeps": sorted(set(everything.exclude(sweep="").values_list("sweep", flat=True))),
        "filtered": any(chosen[name] for name in NARROWING),
    }
    return render(request, "runs/run_list.html", context)


def queue(request):
    return render(request, "runs/queue.html", queue_for(request.user))


@staff_member_required
@require_POST
def run_priority(request, pk: int):
    run = get_object_or_404(Run, pk=pk)
    try:
        priority = check_priority(request.POST.get("priority", ""), by_staff=True)
    except RequestError as error:
        messages.error(request, f"Priority: {error.message}.")
        return redirect("run-queue")
    Run.objects.filter(pk=run.pk).update(priority=priority)
    queue_scheduling()
    messages.success(request, f"{run.name}: priority {priority}.")
    return redirect("run-queue")
