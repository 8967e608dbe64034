"""What the `manage.py` commands that queue work share: they refuse at once when no worker could
take the work, instead of queueing it where nobody listens and waiting forever."""

from __future__ import annotations

import redis
from django.conf import settings
from django.core.management.base import CommandError

# A broker on this machine or the lab's network answers well within this.
BROKER_CHECK_SECONDS = 3.0


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
