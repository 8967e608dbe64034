"""The staff page "Weights": per network, what the store holds and what to drop in when offline.

Reading the page writes nothing. Filing the files dropped into a cache is a write (rows made, each
file hashed and load-checked), so it is the page's POST ("Look in the caches"), as it is
`manage.py weights list`'s, never a side effect of a GET."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render

from workbench.weights.models import StoredWeights
from workbench.weights.selectors import weights_overview
from workbench.weights.services import store_networks, weights_discover

# The catalogue's rows per page: with timm installed it holds over a hundred published files.
CATALOGUE_PAGE = 25
MAX_QUERY = 100


def _require_staff(request) -> None:
    """The store's files are the server's business: for others the page does not exist."""
    if not request.user.is_staff:
        raise Http404


@login_required
def weights_page(request):
    _require_staff(request)
    if request.method == "POST":
        return _discover(request)
    query = request.GET.get("q", "").strip()[:MAX_QUERY]
    overview = weights_overview(store_networks(), query=query)
    # get_page: a page out of range or not a number is the nearest page, never an error.
    page = Paginator(overview.not_filed, CATALOGUE_PAGE).get_page(request.GET.get("page"))
    context = {"overview": overview, "query": query, "catalogue": page, "open": bool(query) or page.number > 1}
    return render(request, "weights/weights.html", context)


def _discover(request):
    """Files what was dropped into the caches since the last look; says what it skipped and why."""
    before = StoredWeights.objects.count()
    for line in weights_discover():
        messages.warning(request, line)
    messages.info(request, f"Looked in the caches: {StoredWeights.objects.count() - before} newly filed.")
    return redirect("weights")
