"""The workbench's own middleware: login required on every page; 503 with words while Redis is away."""

from __future__ import annotations

import logging

import kombu.exceptions
import redis.exceptions
from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequiredMiddleware
from django.http import HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin
from django.utils.html import format_html

log = logging.getLogger(__name__)


class LoginRequiredMiddleware(DjangoLoginRequiredMiddleware):
    """Every page requires login; the REST API answers 401/403 itself instead of redirecting.

    API views authenticate in Django REST framework (session or token), after middleware has
    run, so they are left to DRF's default IsAuthenticated permission.
    """

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


# Redis down (refused) or stalled (the socket timeout of settings.redis_cache) for the cache, the
# channel layers or Celery's broker (kombu wraps what it cannot send in OperationalError).
BROKER_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    kombu.exceptions.OperationalError,
)
BROKER_MESSAGE = "The workbench's broker does not answer; try again in a minute."


class BrokerUnavailableMiddleware(MiddlewareMixin):
    """Any page or API call whose request needs Redis answers 503 with words while Redis is down
    or stalled, not a 500: the one home of that answer (sign-in's throttle, the cache, queueing).

    Last in MIDDLEWARE, so its process_exception sees the view's exception first; DRF re-raises
    what it does not know, so API views land here too."""

    def process_exception(self, request, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, BROKER_ERRORS):
            return None
        # The address and the library's words stay in the server's log, never in the answer.
        log.warning("%s %s: the broker did not answer (%s)", request.method, request.path, type(exception).__name__)
        if request.path_info.startswith("/api/"):
            response: HttpResponse = JsonResponse({"detail": BROKER_MESSAGE}, status=503)
        else:
            response = HttpResponse(
                format_html(
                    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{}</title></head>'
                    "<body><main><h1>Service unavailable</h1><p>{}</p></main></body></html>",
                    "Service unavailable",
                    BROKER_MESSAGE,
                ),
                status=503,
            )
        response["Retry-After"] = "60"
        return response
