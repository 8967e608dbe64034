"""Sign-in, sign-out and failed sign-ins, from every way in: Django's auth signals fire for the login page,
the admin's, the API's token and any backend added later (LDAP, OpenID Connect)."""

from __future__ import annotations

from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.dispatch import receiver

from workbench.audit.context import process_door
from workbench.audit.services import write


def _door_and_address(request) -> tuple[str, str | None]:
    if request is None:
        return process_door(), None
    door = "api" if request.path.startswith("/api/") else "page"
    return door, request.META.get("REMOTE_ADDR") or None


@receiver(user_logged_in, dispatch_uid="audit-signin")
def signed_in(sender, request, user, **kwargs) -> None:
    door, address = _door_and_address(request)
    write(door=door, address=address, request_actor=None, actor=user, action="signin",
          target_kind="user", target_id=str(user.pk), target_name=user.get_username())  # fmt: skip


@receiver(user_login_failed, dispatch_uid="audit-signin-failed")
def sign_in_failed(sender, credentials, request=None, **kwargs) -> None:
    door, address = _door_and_address(request)
    tried = str((credentials or {}).get("username", ""))[:150]
    write(door=door, address=address, request_actor=None, actor=None, actor_name=tried,
          action="signin.failed", target_kind="user", target_name=tried, outcome="refused")  # fmt: skip


@receiver(user_logged_out, dispatch_uid="audit-signout")
def signed_out(sender, request, user, **kwargs) -> None:
    if user is None:
        return  # a session that had no user
    door, address = _door_and_address(request)
    write(door=door, address=address, request_actor=None, actor=user, action="signout",
          target_kind="user", target_id=str(user.pk), target_name=user.get_username())  # fmt: skip
