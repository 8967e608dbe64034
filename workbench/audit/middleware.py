"""Opens each web request's audit context and writes its rows once the response is known.

Every request has a context (a GET's services may record too: a sign-in's memberships). Every
request with an unsafe method (POST, PUT, PATCH, DELETE) that reached a view leaves at least one
row: the changes its services recorded, or, when they recorded none (a refusal, or a door whose
service keeps no detail), one row named after the URL, with its ids and the status.
"""

from __future__ import annotations

from django.urls import Resolver404, resolve

from workbench.audit.context import RequestContext, current
from workbench.audit.services import write

SAFE_METHODS = {"GET", "HEAD", "OPTIONS", "TRACE"}
# Requests that are no change of state, with why.
NOT_CHANGES = {
    "api-token": "asking for a token is a sign-in: recorded by the sign-in signals",
    "login": "a sign-in: recorded by the sign-in signals",
    "logout": "a sign-out: recorded by the sign-out signal (the request ends signed out)",
}


class AuditMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        door = "api" if request.path.startswith("/api/") else "page"
        context = RequestContext(door=door, address=request.META.get("REMOTE_ADDR") or None)
        token = current.set(context)
        try:
            response = self.get_response(request)
        finally:
            current.reset(token)
        if request.method not in SAFE_METHODS or context.pending:
            # A GET changes nothing of its own; what its services recorded (the memberships an
            # OpenID provider's sign-in callback gave) is written all the same.
            self._write(request, context, response.status_code)
        return response

    def _write(self, request, context: RequestContext, status: int) -> None:
        try:
            match = resolve(request.path_info)
        except Resolver404:
            return  # reached no view: nothing could have changed
        user = getattr(request, "user", None)
        refused = str(status) if status >= 400 else None
        # An excused door (a sign-in) writes no row of its own, but what its services recorded
        # (the memberships a directory's groups gave) is written all the same.
        # Anonymous requests change nothing (the login requirement sends them away): no row of
        # their own, so nobody signed out can fill the trail.
        signed_in = user is not None and user.is_authenticated
        excused = match.url_name in NOT_CHANGES or request.method in SAFE_METHODS or not signed_in
        rows = context.pending or ([] if excused else [_request_row(match, status)])
        for row in rows:
            if refused and row["outcome"] == "done":
                row["outcome"] = refused
            write(door=context.door, address=context.address, request_actor=user, **row)


def _request_row(match, status: int) -> dict:
    """A row for a request whose services recorded nothing: `api-run-abort` -> action `run.abort`,
    the target's kind `run` and its id from the URL (`pk`, `slug`, or the one id it names)."""
    name = (match.url_name or match.route).removeprefix("api-")
    ident = ""
    if match.kwargs:
        ident = str(match.kwargs.get("pk") or match.kwargs.get("slug") or next(iter(match.kwargs.values())))
    return {
        "action": name.replace("-", "."),
        "actor": None,
        "target_kind": name.split("-")[0] if ident else "",
        "target_id": ident,
        "target_name": "",
        "before": None,
        "after": None,
        # What the request answered: nothing says whether it changed anything (a page answers a
        # refusal with a message and a redirect), so the row says the status, never "done".
        "outcome": str(status),
    }
