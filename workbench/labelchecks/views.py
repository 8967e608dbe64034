"""Label check pages: start one from the dataset page's form, follow its folds, read its suspects
side by side with their given and suggested labels, accept the chosen ones into a new version."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from datasets.selectors import dataset_for, dataset_to_change
from workbench.core.errors import RequestError
from workbench.labelchecks import services
from workbench.labelchecks.selectors import (
    fold_rows,
    label_check_for,
    label_check_to_change,
    label_checks_visible_to,
    suspects_shown,
)


@require_GET
def label_check_list(request):
    checks = label_checks_visible_to(request.user)
    if request.GET.get("dataset", "").isdigit():
        checks = checks.filter(dataset_id=int(request.GET["dataset"]))
    checks = [services.label_check_refresh(check=check) for check in checks[:200]]
    return render(request, "labelchecks/list.html", {"checks": checks})


@require_POST
def label_check_new(request):
    dataset = dataset_for(
        request.user, int(request.POST["dataset"]) if request.POST.get("dataset", "").isdigit() else 0
    )
    config = {}
    for name, cast in (("epochs", float), ("batch_size", int)):
        if request.POST.get(name, "").strip():
            try:
                config[name] = cast(request.POST[name])
            except ValueError:
                messages.error(request, f"{name}: {request.POST[name]!r} is not a number")
                return redirect("dataset-detail", pk=dataset.pk)
    try:
        check = services.label_check_start(
            owner=request.user, dataset=dataset, network=request.POST.get("network", ""), config=config,
            folds=request.POST.get("folds") or None, gpus=request.POST.get("gpus") or "auto",
        )  # fmt: skip
    except RequestError as error:
        messages.error(request, str(error))
        return redirect("dataset-detail", pk=dataset.pk)
    messages.success(request, f"Label check {check.pk}: {check.folds} fold runs are queued.")
    return redirect("label-check-detail", pk=check.pk)


@require_GET
def label_check_detail(request, pk: int):
    check = services.label_check_refresh(check=label_check_for(request.user, pk))
    context = {"check": check, "folds": fold_rows(check), "suspects": suspects_shown(check, with_pictures=True)}
    return render(request, "labelchecks/detail.html", context)


@require_POST
def label_check_action(request, pk: int, action: str):
    check = label_check_to_change(request.user, pk)
    try:
        if action == "abort":
            services.label_check_abort(check=check, by=request.user)
        else:
            services.label_check_pause(check=check, by=request.user, resume=action == "resume")
    except RequestError as error:
        messages.error(request, str(error))
    return redirect("label-check-detail", pk=check.pk)


@require_POST
def label_check_accept(request, pk: int):
    check = label_check_for(request.user, pk)
    dataset_to_change(request.user, check.dataset_id)
    decisions = []
    for key, action in request.POST.items():  # fix-<split>-<index>: the suspects page's choices
        split, _, index = key.removeprefix("fix-").partition("-")
        if key.startswith("fix-") and index.isdigit():
            label = request.POST.get(f"label-{split}-{index}", "")
            decisions.append({"image": [split, int(index)], "action": action,
                              "label": int(label) if label.isdigit() else label})  # fmt: skip
    try:
        version = services.label_check_accept(check=check, by=request.user, decisions=decisions)
    except RequestError as error:
        messages.error(request, str(error))
        return redirect("label-check-detail", pk=check.pk)
    messages.success(request, f"Version {version.number} made: {version.note}. New runs train on it.")
    return redirect("dataset-detail", pk=check.dataset_id)
