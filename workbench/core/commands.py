"""What the `manage.py` commands that queue work share: whom they act for (`command_owner`, one
rule for every command), and refusing at once when no worker could take the work, instead of
queueing it where nobody listens and waiting forever."""

from __future__ import annotations

import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

# A broker on this machine or the lab's network answers well within this.
BROKER_CHECK_SECONDS = 3.0


def command_owner(username: str | None, *, default=None, option: str = "--owner"):
    """The user a command acts for: --owner USERNAME (or `option`, `--as` where the user acts on
    others' rows) when given; else `default` (the owner of the dataset the command works on, where
    it works on one); else the only superuser, as on a one-person workbench. CommandError names
    the option when none of them gives a user."""
    users = get_user_model().objects
    if username:
        owner = users.filter(username=username).first()
        if owner is None:
            raise CommandError(f"{option}: no user named {username!r}")
        return owner
    if default is not None:
        return default
    admins = list(users.filter(is_superuser=True)[:2])
    if len(admins) != 1:
        raise CommandError(f"give {option} USERNAME (there is not exactly one superuser to default to)")
    return admins[0]


def refusal_error(error: Exception) -> CommandError:
    """A page's 404 or 403 (Http404, PermissionDenied) as the command's one-line error."""
    return CommandError(str(error) or "not allowed")


def require_running_workbench() -> None:
    """Raises CommandError unless the broker the workers listen to answers.

    Without REDIS_URL that broker is the embedded server of the workbench running on this data
    dir (settings find it through the run command's record); with REDIS_URL, that server.
    """
    if not settings.REDIS_URL:
        raise CommandError(
            f"no workbench is running on this data dir ({settings.DATA_DIR}): start it first with "
            "`make run` (manage.py runworkbench) in another terminal, with the same WORKBENCH_DATA_DIR, "
            "or set REDIS_URL to its broker"
        )
    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_connect_timeout=BROKER_CHECK_SECONDS, socket_timeout=BROKER_CHECK_SECONDS
    )
    try:
        client.ping()
    except redis.exceptions.RedisError as error:
        where = "the workbench's embedded broker" if settings.EMBEDDED_REDIS else "the broker of REDIS_URL"
        raise CommandError(f"{where} does not answer ({error}); is the workbench running?") from None
    finally:
        client.close()
