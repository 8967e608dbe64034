"""Reading the audit trail: staff only, with the filters the page, the API and the command share."""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from workbench.audit.models import AuditEntry
from workbench.core.errors import RequestError

FILTERS = ("user", "action", "kind", "id", "door", "since")


def audit_for(user, params) -> QuerySet[AuditEntry]:
    """The rows staff may read, narrowed by `params` (user, action: a prefix such as `run.`,
    kind and id of the target, door, since: a date or an ISO time); RequestError names a bad one."""
    if user is None or not user.is_authenticated or not user.is_staff:
        raise PermissionDenied("only staff read the audit trail")
    rows = AuditEntry.objects.all()
    if params.get("user"):
        rows = rows.filter(actor_name=params["user"])
    if params.get("action"):
        rows = rows.filter(action__startswith=params["action"])
    if params.get("kind"):
        rows = rows.filter(target_kind=params["kind"])
    if params.get("id"):
        rows = rows.filter(target_id=str(params["id"]))
    if params.get("door"):
        if params["door"] not in AuditEntry.Door.values:
            raise RequestError("door", f"one of {', '.join(AuditEntry.Door.values)}")
        rows = rows.filter(door=params["door"])
    if params.get("since"):
        rows = rows.filter(at__gte=_moment(params["since"]))
    return rows


def _moment(text: str) -> datetime:
    moment = parse_datetime(text)
    if moment is None and (day := parse_date(text)) is not None:
        moment = datetime(day.year, day.month, day.day)
    if moment is None:
        raise RequestError("since", f"{text!r} is not a date (2026-12-01) or a time (2026-12-01T09:30)")
    if moment.tzinfo is None:
        moment = timezone.make_aware(moment)
    return moment


def entry_json(entry: AuditEntry) -> dict:
    return {
        "id": entry.pk,
        "at": entry.at.isoformat(),
        "user": entry.actor_name or None,
        "door": entry.door,
        "address": entry.address,
        "action": entry.action,
        "target": {"kind": entry.target_kind, "id": entry.target_id, "name": entry.target_name},
        "outcome": entry.outcome,
        "before": entry.before,
        "after": entry.after,
    }
