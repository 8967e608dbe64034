"""The notices app at each housekeeping pass of a worker: find new events (events.py) and queue
the sending of what is due (services.queue_due: the tasks send it). Its failure is logged and
never reaches the worker."""

from __future__ import annotations

import logging

from django.dispatch import receiver

from workbench.notices import events, services
from workbench.workers.signals import housekeeping

log = logging.getLogger(__name__)


@receiver(housekeeping, dispatch_uid="notices.pass")
def notices_pass(sender, hostname: str, **kwargs) -> None:
    try:
        events.notice_pass()
        services.queue_due()
    except Exception:
        log.exception("the notices' pass failed; the next one tries again")
