"""What the queue places: a job of some kind (a run, a benchmark; a search's trials are runs).

The scheduler orders, places and estimates jobs without knowing their kind; each kind says
which of its jobs wait, which devices its jobs hold, how one starts (all or nothing), how one
is told why it waits, and how long one still needs. The runs' kind lives in this package
(`run_jobs.py`); a kind from an app above this one registers itself from its AppConfig.ready()
(the benchmarks' does), so this package never imports those apps.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from workbench.runs.devices import DeviceRequest

if TYPE_CHECKING:  # types only
    from workbench.projects.quotas import Stretch
    from workbench.workers.models import Device, WorkerHost


@dataclass
class Placement:
    """Where a job would start: one host and the devices it takes there."""

    host: WorkerHost
    devices: list[Device]


# The name of the runs' kind (run_jobs.py): the kind every wait reason is about.
RUN = "run"


@dataclass(eq=False)
class Job:
    """One entry of the queue, whatever its kind. `row` is the kind's own model row."""

    kind: str
    pk: int
    owner_id: int
    priority: int
    queued_at: datetime
    wants: DeviceRequest
    row: Any
    # False: not to be placed yet (a run whose dataset is still building); its kind says why.
    ready: bool = True
    # The project its use counts against besides its owner's (GPU-hour quotas).
    project_id: int | None = None
    # Set by the pass: why it may not start now whatever is free (a spent quota), and until when.
    held: str = ""
    held_until: datetime | None = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.kind, self.pk)


class JobKind(Protocol):
    """What the scheduler asks of a kind of job."""

    name: str
    # How a wait reason names a job of this kind that holds the devices another job needs.
    holder_words: str

    def pending(self) -> list[Job]:
        """Its jobs that wait for devices (any order: the queue orders them)."""

    def holders(self, devices: Iterable[Device]) -> dict[int, Job]:
        """Of `devices`, those its jobs hold: device pk -> the job."""

    def claim(self, job: Job, placement: Placement) -> bool:
        """Starts `job` on `placement`, all or nothing, by conditional updates; False when another
        pass took the job or a device first."""

    def wait(self, job: Job, *, reason: str, estimate: datetime | None, holder: Job | None) -> None:
        """Records why `job` waits (with `holder_words` standing for `holder`) and when it should start."""

    def not_ready(self, job: Job) -> None:
        """`job` was not ready to be placed (`Job.ready` False): records why, or ends it."""

    def seconds_left(self, job: Job, *, now: datetime) -> float | None:
        """How long `job` still needs once started (a waiting job: all of it); None when nothing says."""

    def reclaim(self) -> int:
        """Ends or interrupts its running jobs whose worker was lost; how many."""

    def describe(self, job: Job, *, viewer) -> Shown:
        """`job` as `viewer` may see it on the queue page and in the API."""

    def gpu_stretches(self, *, since: datetime, now: datetime) -> list[Stretch]:
        """The GPUs its jobs held since `since` (up to `now` for one still holding them)."""


@dataclass(frozen=True)
class Shown:
    """A job as one viewer may see it: another user's job is anonymous, and no wait reason
    names a holder the viewer may not see."""

    visible: bool
    name: str
    owner: str | None
    url: str | None
    state: str
    requested_devices: str
    wait_reason: str
    estimated_start: datetime | None
    progress: float
    executor: str = "local"


_KINDS: dict[str, JobKind] = {}


def register(kind: JobKind) -> None:
    """Adds a kind of job to the one queue (idempotent: ready() may run twice in tests)."""
    _KINDS[kind.name] = kind


def kinds() -> list[JobKind]:
    return list(_KINDS.values())


def kind_of(job: Job) -> JobKind:
    return _KINDS[job.kind]
