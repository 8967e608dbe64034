"""Login throttling per account and per client address.

Failures are counted in the shared cache for a window. The same message is shown whether or not
the account exists, and the account key is counted for unknown names too, so the throttle never
tells an attacker which accounts exist.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.cache import cache

LOCKED_MESSAGE = "Too many failed sign-in attempts. Wait {minutes} minutes and try again."


def _account_key(username: str) -> str:
    digest = hashlib.sha256(username.strip().lower().encode()).hexdigest()
    return f"login-failures:account:{digest}"


def _ip_key(ip: str) -> str:
    return f"login-failures:ip:{ip}"


def client_ip(request) -> str:
    return request.META.get("REMOTE_ADDR") or "unknown"


def login_locked(*, username: str, ip: str) -> bool:
    failures_account = cache.get(_account_key(username), 0)
    failures_ip = cache.get(_ip_key(ip), 0)
    return failures_account >= settings.LOGIN_FAILURES_PER_ACCOUNT or failures_ip >= settings.LOGIN_FAILURES_PER_IP


def login_failed(*, username: str, ip: str) -> None:
    for key in (_account_key(username), _ip_key(ip)):
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
