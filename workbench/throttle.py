"""Login throttling per account and per client address, enforced in the authentication backend.

Failures are counted in the shared cache for a window. The same message is shown whether or not
the account exists, and the account key is counted for unknown names too, so the throttle never
tells an attacker which accounts exist.

The count and the refusal live in the two backends of AUTHENTICATION_BACKENDS:
`ThrottledModelBackend` for passwords (the local one, then the LDAP directory's) and
`ThrottledOIDCBackend` for the OpenID provider's answers (counted per address). Every password
check goes through `django.contrib.auth.authenticate()`
(the login page, the admin login, the API token endpoint, DRF's basic auth if it is ever turned
on, anything added later), so no entry point can skip the throttle. The forms and the token view
only ask `login_locked()` first to show the "too many attempts" message instead of the generic one.
"""

from __future__ import annotations

import hashlib
import logging

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.signals import user_login_failed
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured, PermissionDenied, SuspiciousOperation
from django.urls import reverse
from requests import RequestException

from workbench.directory.ldap import ldap_authenticate, ldap_enabled
from workbench.directory.oidc import DirectoryOIDCBackend, oidc_enabled

log = logging.getLogger(__name__)
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


def _count(key: str) -> int:
    # add() starts the window only for the first attempt; incr() keeps the window's expiry and is
    # atomic in Redis, so attempts made at the same moment each get their own number.
    cache.add(key, 0, timeout=settings.LOGIN_FAILURE_WINDOW_SECONDS)
    try:
        return cache.incr(key)
    except ValueError:
        # Expired between add() and incr(): start a fresh window.
        cache.set(key, 1, timeout=settings.LOGIN_FAILURE_WINDOW_SECONDS)
        return 1


def attempt_allowed(*, username: str, ip: str | None) -> bool:
    """Counts a password attempt before the password is checked, and says whether it may go on.

    Counting first is what makes the limit hold under parallel attempts: a check made before any
    of them is counted would let them all through while the password hashes run.
    """
    allowed = _count(_account_key(username)) <= settings.LOGIN_FAILURES_PER_ACCOUNT
    if ip is not None:
        allowed = _count(_ip_key(ip)) <= settings.LOGIN_FAILURES_PER_IP and allowed
    return allowed


def login_succeeded(*, username: str, ip: str | None) -> None:
    """A right password: the account starts afresh, and the address gets its attempt back (a lab
    behind one address signs in many times a day)."""
    cache.delete(_account_key(username))
    if ip is not None:
        try:
            cache.decr(_ip_key(ip))
        except ValueError:
            pass  # the window expired meanwhile: nothing to give back


def locked_message() -> str:
    return LOCKED_MESSAGE.format(minutes=max(1, settings.LOGIN_FAILURE_WINDOW_SECONDS // 60))


class ThrottledModelBackend(ModelBackend):
    """Django's username/password backend behind the login throttle.

    Every attempt is counted before its password is checked; one over the limit raises
    PermissionDenied, which makes `authenticate()` stop and refuse even the right password.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if username is None or password is None:
            return None  # not a password login (another backend's credentials): nothing to count
        username = str(username)
        ip = client_ip(request)
        if not attempt_allowed(username=username, ip=ip):
            raise PermissionDenied(locked_message())
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None and ldap_enabled():  # the same counted attempt: the directory's password
            user = ldap_authenticate(username, password)
        if user is not None:
            login_succeeded(username=username, ip=ip)
        return user

    async def aauthenticate(self, request, username=None, password=None, **kwargs):
        # ModelBackend's async variant does its own lookup: route it through the throttled one.
        return await sync_to_async(self.authenticate)(request, username=username, password=password, **kwargs)


class ThrottledOIDCBackend(ModelBackend):
    """The OpenID provider's code flow (workbench/directory/oidc.py) behind the throttle: each
    answer the callback brings is an attempt of its client address. Only the callback's request
    (with `code` and `state`) reaches the provider; a password login passes by."""

    def authenticate(self, request, **kwargs):
        if not oidc_enabled() or request is None or not {"code", "state"} <= set(request.GET):
            return None
        if request.path != reverse("oidc_authentication_callback"):
            return None  # a login page or token request with ?code=&state= is no provider's answer
        ip = client_ip(request)
        key = f"openid:{ip}"
        if not attempt_allowed(username=key, ip=ip):
            raise PermissionDenied(locked_message())
        try:
            user = DirectoryOIDCBackend().authenticate(request, **kwargs)
        except (SuspiciousOperation, ImproperlyConfigured, RequestException) as error:
            # A forged or stale answer, a provider that does not answer: a failed sign-in (the
            # callback sends the user back to the login page with words), never a server error.
            log.warning("OpenID sign-in failed: %s", error)
            user_login_failed.send(sender=__name__, credentials={"username": key}, request=request)
            return None
        if user is not None:
            login_succeeded(username=key, ip=ip)
        return user
