"""The staff page "Weights": per network, what the store holds and what to drop in when offline."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render

from workbench.weights.selectors import weights_overview
from workbench.weights.services import store_networks, weights_discover


def _require_staff(request) -> None:
    """The store's files are the server's business: for others the page does not exist."""
    if not request.user.is_staff:
        raise Http404


@login_required
def weights_page(request):
    _require_staff(request)
    skipped = weights_discover()  # a file dropped into a cache shows up on the next visit
    context = {"overview": weights_overview(store_networks()), "skipped": skipped}
    return render(request, "weights/weights.html", context)
