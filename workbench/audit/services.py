"""Writing the audit trail: `record` from the services, one row per change (see context.py for
when it is written)."""

from __future__ import annotations

import logging

from django.db import models, transaction

from workbench.audit.context import current, process_door
from workbench.audit.models import AuditEntry

log = logging.getLogger(__name__)


def record(
    *,
    action: str,
    actor=None,
    target: models.Model | None = None,
    target_kind: str = "",
    target_id: object = "",
    target_name: str = "",
    before: dict | None = None,
    after: dict | None = None,
    outcome: str = "done",
) -> None:
    """Records one change. In a web request it waits for the response (its actor, address and
    status come from there, `actor` is used when the request has none); anywhere else it is
    written now, by `actor`."""
    row = {
        "action": action,
        "actor": actor,
        "target_kind": target_kind or (target._meta.model_name if target is not None else ""),
        "target_id": str(target_id or (target.pk if target is not None else "")),
        "target_name": target_name or (str(getattr(target, "name", "") or "") if target is not None else ""),
        "before": before,
        "after": after,
        "outcome": outcome,
    }
    request = current.get()
    if request is not None:
        request.pending.append(row)
        return
    write(door=process_door(), address=None, request_actor=None, **row)


def write(*, door: str, address: str | None, request_actor, actor, **row) -> AuditEntry | None:
    # The request's user did it; `actor` speaks for a change made outside a request (a command's
    # --as, a sign-in's new account). An editor's train-best is the editor's, not the search owner's.
    request_signed_in = request_actor is not None and getattr(request_actor, "is_authenticated", False)
    who = request_actor if request_signed_in else actor
    signed_in = who is not None and getattr(who, "is_authenticated", False)
    fields = {key: value for key, value in row.items() if key in _FIELDS}
    for key, limit in _LIMITS.items():
        if isinstance(fields.get(key), str):
            fields[key] = fields[key][:limit]
    try:
        # A savepoint: on PostgreSQL a failed insert would otherwise break the caller's transaction.
        with transaction.atomic():
            return AuditEntry.objects.create(
                door=door,
                address=address,
                actor=who if signed_in else None,
                actor_name=(row.get("actor_name", "") or (who.get_username() if signed_in else ""))[:150],
                **fields,
            )
    except Exception:
        # The trail must not turn a change that happened into an error the user sees.
        log.exception("could not write the audit row for %s", row.get("action"))
        return None


_FIELDS = {"action", "target_kind", "target_id", "target_name", "before", "after", "outcome"}
_LIMITS = {"action": 80, "target_kind": 40, "target_id": 80, "target_name": 200, "outcome": 16}
