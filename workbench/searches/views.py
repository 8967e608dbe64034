"""The search page (the trials table, the best, the budget, Optuna's plots served as JSON), and
the new-run page's "Create search"."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from workbench.core.adapters import add_form_errors
from workbench.core.errors import RequestError
from workbench.projects.selectors import filtered_by_query
from workbench.runs.validators import sweep_config
from workbench.runs.web.forms import FIELD_OF, RunForm
from workbench.runs.web.wizard_views import render_new_run, submitted_weights
from workbench.searches.forms import SearchForm
from workbench.searches.models import Search
from workbench.searches.plots import search_figures
from workbench.searches.selectors import (
    best_trial,
    budget_words,
    latest_best_run,
    possible_actions,
    search_for,
    searches_visible_to,
    trial_status,
    trial_wait_reason,
    trials_of,
    value_is_averaged,
)
from workbench.searches.services import search_create


@login_required
def search_list(request):
    searches = filtered_by_query(searches_visible_to(request.user), request.user, request.GET)
    rows = [(search, budget_words(search)) for search in searches.select_related("project")[:200]]
    filtered = any(request.GET.get(name) for name in ("project", "shared"))
    return render(request, "searches/search_list.html", {"rows": rows, "filtered": filtered})


@login_required
def search_detail(request, pk: int):
    search = search_for(request.user, pk)
    page = {
        "id": search.pk,
        "api": reverse("api-search", args=[search.pk]),
        "plots": reverse("search-plots", args=[search.pk]),
        "compare": reverse("run-compare"),
        "actions": {
            action: reverse(f"api-search-{action}", args=[search.pk])
            for action in ("pause", "resume", "abort", "train-best")
        },
    }
    best = best_trial(search)
    context = {
        "search": search,
        # Each value marked "(EMA)" when it is the weights' average's; a running trial says what its run does.
        "trials": [
            (trial, value_is_averaged(trial), trial_status(trial), trial_wait_reason(trial, request.user))
            for trial in trials_of(search)
        ],
        "best": best,
        "best_averaged": best is not None and value_is_averaged(best),
        "best_run": latest_best_run(search),
        # Keyed for the template, which cannot read "train-best".
        "actions": {action.replace("-", "_"): allowed for action, allowed in possible_actions(search).items()},
        "budget": budget_words(search),
        "page": page,
    }
    return render(request, "searches/search_detail.html", context)


@login_required
@require_GET
def search_plots(request, pk: int):
    return JsonResponse({"figures": search_figures(search_for(request.user, pk))})


@login_required
@require_POST
def search_new(request):
    """The new-run page's "Create search": its run fields are the base of every trial (RunForm,
    as for a run), its search fields the space, strategy and budget (SearchForm); both shown
    again with their errors when refused."""
    form = RunForm(request.POST, request.FILES, user=request.user)
    search_form = SearchForm(request.POST)
    if form.is_valid() and search_form.is_valid():
        search = _create(request, form, search_form)
        if search is not None:
            messages.success(request, f"Search {search.pk} {search.name} started: its first trials are queued.")
            return redirect("search-detail", search.pk)
    return render_new_run(request, form, search_form=search_form, search_open=True)


def _create(request, form: RunForm, search_form: SearchForm) -> Search | None:
    if len(form.combinations) > 1:
        form.add_error("base_lr", "A search takes one value of each field; say what varies in its parameters.")
        return None
    pretrained = submitted_weights(request, form)
    if form.errors:
        return None
    fields, _ = form.run_request(pretrained=pretrained)
    ((combination, _),) = form.combinations
    try:
        return search_create(
            owner=request.user,
            dataset=form.cleaned_data["dataset"],
            config=sweep_config(fields.pop("config"), combination),
            **fields,
            **search_form.search_request(),
        )
    except RequestError as error:
        if not search_form.add_request_error(error):
            add_form_errors(form, error, field_of=FIELD_OF)
        return None
