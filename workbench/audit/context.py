"""Whom the changes of this request or process are by, and where they wait until written.

A web request's middleware (`middleware.py`) opens a context: the actor, the door and the address,
and a list the services add their changes to, written when the response's status is known. A
process outside a request declares its door once (`manage.py` commands: cli; the workers:
system). The list is mutated, never replaced, so a view run in another thread by asgiref (which
copies the context) adds to the request's own list.
"""

from __future__ import annotations

import contextvars
import sys
from dataclasses import dataclass, field


@dataclass
class RequestContext:
    door: str
    address: str | None
    pending: list[dict] = field(default_factory=list)


current: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar("audit_request", default=None)


_declared: str | None = None


def declare_door(door: str) -> None:
    """Says once what this process is, where its program's name does not: `manage.py
    runworkbench` runs the workbench itself, not a command someone typed."""
    global _declared
    _declared = door


def process_door() -> str:
    """The door of changes made outside a request: a `manage.py` command's are the command line's;
    anything else (Celery workers, the run command's own threads) is the workbench itself."""
    if _declared is not None:
        return _declared
    program = sys.argv[0].rsplit("/", 1)[-1] if sys.argv else ""
    return "cli" if program == "manage.py" else "system"
