"""The one grammar of the weights a run starts from, and the one door that checks and resolves it.

A run's config stores the reference (`config.pretrained`), never a path; the file is resolved at
launch (runs/attempts/config.py), so no place ever maps a path back to a reference.

    weights:<id>                          the store's (shared by every user: manage.py weights list)
    upload:<id>                           an upload of one's own (staff: anyone's), POST /api/pretrained/
    run:<id>  run:<id>:best               a run one may see: its best checkpoint (its latest when none is best)
    run:<id>:last  run:<id>:<step>        its latest snapshot, or its snapshot at that step

Each scheme is a `Scheme` in a registry, the shape of runs/scheduler/jobs.py's `register`: this app
registers `weights` and `upload` (its own rows), and the runs app registers `run` from its
AppConfig.ready(). Why a registry and not `run:` resolved in runs: the weights app sits below
runs (pyproject.toml's layers), and a `run:` reference needs a run's checkpoint; with the registry
the grammar, the refusal and the dispatch have this one home, and only the runs app knows runs.

Checking (`reference_check`) reads and never writes: it is what validators call. Resolving for a
launch (`reference_path`) may write the run's own copy of a run's weights, in the worker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from workbench.core.errors import RequestError

FIELD = "config.pretrained"
# One answer for every reference refused, malformed or not there or not the user's: a missing
# upload, someone else's run, a path, a symlink all read the same, so the API cannot be used to
# learn what exists on the server.
REFUSED = (
    "no such weights you can use; give upload:<id> (an upload of yours, "
    "POST /api/pretrained/), run:<id> / run:<id>:last / run:<id>:<step> (a run you can see) or weights:<id> "
    "(the weights store: manage.py weights list)"
)
_ID = r"[1-9]\d{0,17}"
_GRAMMAR = re.compile(rf"(?P<scheme>weights|upload|run):(?P<pk>{_ID})(?::(?P<which>best|last|\d{{1,12}}))?")
# What a launch reads when its reference no longer resolves (an upload deleted, a run gone): the
# trainer then fails the run naming the field ("file ... not found"), and the worker goes on.
UNAVAILABLE = "pretrained-unavailable.pt"


class WeightsReferenceError(RequestError):
    """A reference refused. One line, naming the field (config.pretrained) and what is wrong."""

    def __init__(self, message: str = REFUSED) -> None:
        super().__init__(FIELD, message)

    # Made again from its pairs (a re-keyed copy, a pickled one: a Celery result, a test worker),
    # it is a plain RequestError: its own constructor takes a message only, the field being fixed.
    @classmethod
    def of(cls, pairs: list[tuple[str | None, str]]) -> RequestError:
        return RequestError.of(pairs)

    def __reduce__(self):
        return (RequestError, (*self.errors[0], *self.errors[1:]))


@dataclass(frozen=True)
class Reference:
    scheme: str  # weights | upload | run
    pk: int
    which: str | int | None = None  # run: only; "best", "last" or a step

    def __str__(self) -> str:
        return f"{self.scheme}:{self.pk}" + ("" if self.which in (None, "best") else f":{self.which}")


def reference_parse(value: Any) -> Reference:
    """`value` as a Reference, by the grammar alone (nothing read); WeightsReferenceError if not."""
    match = _GRAMMAR.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise WeightsReferenceError()
    scheme, which = match.group("scheme"), match.group("which")
    if which is not None and scheme != "run":
        raise WeightsReferenceError()  # only a run has checkpoints to choose from
    if scheme == "run":
        which = "best" if which is None else (int(which) if which.isdigit() else which)
    return Reference(scheme, int(match.group("pk")), which)


class Scheme(Protocol):
    """What the door asks of one kind of reference."""

    name: str

    def check(self, reference: Reference, *, owner, network: str) -> None:
        """Raises WeightsReferenceError unless `owner` may start `network` from it. Reads only."""

    def path(self, reference: Reference, *, owner, run_dir: Path) -> Path:
        """The file the trainer of the run in `run_dir` reads (at launch, in the worker)."""

    def describe(self, reference: Reference, *, viewer, run_dir: Path) -> dict | None:
        """What the run page says the run was fine-tuned from, as `viewer` may see it; never a path."""

    def preprocessing(self, reference: Reference) -> dict:
        """The weights' own normalisation as the trainer's data fields; {} when they have none."""


_SCHEMES: dict[str, Scheme] = {}


def register(scheme: Scheme) -> None:
    """Adds a scheme (idempotent: ready() may run twice in tests)."""
    _SCHEMES[scheme.name] = scheme


def _scheme(reference: Reference) -> Scheme:
    scheme = _SCHEMES.get(reference.scheme)
    if scheme is None:  # an app that registers it is not installed
        raise WeightsReferenceError()
    return scheme


def reference_check(value: Any, *, owner, network: str) -> Reference:
    """The rule for what a run may start from: the grammar, then the scheme's own check (there,
    visible to `owner`, fits `network`). Writes nothing. A config naming weights without an owner
    is refused."""
    reference = reference_parse(value)
    if owner is None:
        raise WeightsReferenceError()
    _scheme(reference).check(reference, owner=owner, network=network)
    return reference


def reference_path(value: Any, *, owner, network: str, run_dir: Path) -> Path:
    """At launch: the file the trainer reads for the run in `run_dir`, checked again (an upload
    deleted or a run no longer visible since the submit); when it no longer resolves, a file that
    is not there, so the trainer fails the run naming the field instead of the worker failing."""
    try:
        reference = reference_check(value, owner=owner, network=network)
        return _scheme(reference).path(reference, owner=owner, run_dir=run_dir)
    except WeightsReferenceError:
        return Path(run_dir) / UNAVAILABLE


def reference_describe(value: Any, *, viewer, run_dir: Path) -> dict | None:
    """What a run was fine-tuned from, for its page (None for a run trained from scratch)."""
    try:
        reference = reference_parse(value)
        return _scheme(reference).describe(reference, viewer=viewer, run_dir=run_dir)
    except WeightsReferenceError:
        return None


def reference_preprocessing(value: Any) -> dict:
    """The normalisation the weights bring (the store's, from the library's metadata); {} otherwise."""
    try:
        reference = reference_parse(value)
        return _scheme(reference).preprocessing(reference)
    except WeightsReferenceError:
        return {}
