"""The search page: the trials table, the best, the budget, Optuna's plots (served as JSON)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import render
from django.urls import reverse

from workbench.searches.plots import search_figures
from workbench.searches.selectors import best_trial, budget_words, search_for, searches_visible_to, trials_of


@login_required
def search_list(request):
    searches = searches_visible_to(request.user)[:200]
    rows = [(search, budget_words(search)) for search in searches]
    return render(request, "searches/search_list.html", {"rows": rows})


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
    context = {
        "search": search,
        "trials": trials_of(search),
        "best": best_trial(search),
        "budget": budget_words(search),
        "page": page,
    }
    return render(request, "searches/search_detail.html", context)


@login_required
def search_plots(request, pk: int):
    return JsonResponse({"figures": search_figures(search_for(request.user, pk))})
