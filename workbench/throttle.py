"""Login throttling per account and per client address, enforced in the authentication backend.

Failures are counted in the shared cache for a window. The same message is shown whether or not
the account exists, and the account key is counted for unknown names too, so the throttle never
tells an attacker which accounts exist.

The count and the refusal live in `ThrottledModelBackend`, the only entry of
AUTHENTICATION_BACKENDS: every password check goes through `django.contrib.auth.authenticate()`
(the login page, the admin login, the API token endpoint, DRF's basic auth if it is ever turned
on, anything added later), so no entry point can skip the throttle. The forms and the token view
only ask `login_locked()` first to show the "too many attempts" message instead of the generic one.
"""

from __future__ import annotations

import hashlib

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.cache import cache
from django.core.exceptions import PermissionDenied

LOCKED_MESSAGE = "Too many failed sign-in attempts. Wait {minutes} minutes and try again."


def _account_key(username: str) -> str:
    digest = hashlib.sha256(username.strip().lower().encode()).hexdigest()
    return f"login-failures:account:{digest}"


def _ip_key(ip: str) -> str:
    return f"login-failures:ip:{ip}"


def client_ip(request) -> str | None:
    """The client's address, or None without a request (manage.py, a test client's login())."""
    if request is None:
        return None
    return request.META.get("REMOTE_ADDR") or "unknown"


def login_locked(*, username: str, ip: str | None) -> bool:
    if cache.get(_account_key(username), 0) >= settings.LOGIN_FAILURES_PER_ACCOUNT:
        return True
    return ip is not None and cache.get(_ip_key(ip), 0) >= settings.LOGIN_FAILURES_PER_IP


def login_failed(*, username: str, ip: str | None) -> None:
    keys = [_account_key(username)] + ([_ip_key(ip)] if ip is not None else [])
    for key in keys:
        # add() starts the window only for the first failure; incr() keeps the window's expiry.
        cache.add(key, 0, timeout=settings.LOGIN_FAILURE_WINDOW_SECONDS)
        try:
            cache.incr(key)
        except ValueError:
            # Expired between add() and incr(): start a fresh window.
            cache.set(key, 1, timeout=settings.LOGIN_FAILURE_WINDOW_SECONDS)


def login_succeeded(*, username: str) -> None:
    cache.delete(_account_key(username))


def locked_message() -> str:
    return LOCKED_MESSAGE.format(minutes=max(1, settings.LOGIN_FAILURE_WINDOW_SECONDS // 60))


class ThrottledModelBackend(ModelBackend):
    """Django's username/password backend behind the login throttle.

    A locked account or address raises PermissionDenied, which makes `authenticate()` stop and
    refuse even the right password; every wrong password is counted, whoever asked.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if username is None or password is None:
            return None  # not a password login (another backend's credentials): nothing to count
        username = str(username)
        ip = client_ip(request)
        if login_locked(username=username, ip=ip):
            raise PermissionDenied(locked_message())
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            login_failed(username=username, ip=ip)
        else:
            login_succeeded(username=username)
        return user

    async def aauthenticate(self, request, username=None, password=None, **kwargs):
        # ModelBackend's async variant does its own lookup: route it through the throttled one.
        return await sync_to_async(self.authenticate)(request, username=username, password=password, **kwargs)
