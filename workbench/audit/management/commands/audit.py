"""`manage.py audit`: the audit trail, newest first, with the API's filters.

manage.py audit [--user alice] [--action run.] [--kind run --id 12] [--door api] [--since 2026-12-01]
"""

from __future__ import annotations

import json as _json

from django.core.management.base import BaseCommand

from workbench.audit.selectors import audit_for, entry_json
from workbench.core.adapters import command_error
from workbench.core.commands import command_owner
from workbench.core.errors import RequestError


class Command(BaseCommand):
    help = "Print the audit trail (staff), newest first."

    def add_arguments(self, parser):
        for name in ("user", "action", "kind", "id", "door", "since"):
            parser.add_argument(f"--{name}")
        parser.add_argument("--limit", type=int, default=50, help="rows at most (default 50)")
        parser.add_argument("--json", action="store_true", help="one JSON object per line")
        parser.add_argument("--as", dest="acting", metavar="USERNAME", help="who reads (default: the only superuser)")

    def handle(self, *args, limit, json: bool = False, acting=None, **options):
        reader = command_owner(acting, option="--as")
        try:
            rows = list(audit_for(reader, options)[: max(limit, 1)])
        except RequestError as error:
            raise command_error(error) from None
        for entry in rows:
            self.stdout.write(_line(entry, as_json=json))
        if not rows:
            self.stdout.write("no entries")


def _line(entry, *, as_json: bool) -> str:
    if as_json:
        return _json.dumps(entry_json(entry))
    target = f"{entry.target_kind} {entry.target_id} {entry.target_name}".strip()
    change = f" {entry.before or '-'} -> {entry.after or '-'}" if entry.before or entry.after else ""
    where = f" from {entry.address}" if entry.address else ""
    who = entry.actor_name or "-"
    return (
        f"{entry.at:%Y-%m-%d %H:%M:%S}  {who}  {entry.door}{where}  {entry.action}  {target}  {entry.outcome}{change}"
    )
