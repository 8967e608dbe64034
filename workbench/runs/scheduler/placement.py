"""Queue order and placement, for jobs of every kind: what a pass decides, in memory.

Queue order: higher priority first; within a priority, users take turns (each user's first
waiting job, then each user's second...), oldest first within a turn, so one user's hundred runs
(or a search's trials, or a benchmark) cannot starve another user's one. A job that cannot start
blocks only lower priorities: jobs of the same priority may start around it when what they need
is free (backfill).

Backfill below a waiting job of higher priority (issue 33), decided conservatively: a lower job
starts only on free devices that no waiting job of higher priority could ever be placed on
(`could_use`: a CPU for a GPU job and GPUs for a CPU job, another host or other GPUs than a
request for named GPUs names, a host with fewer GPUs in all than the job needs), so it cannot
delay them whatever anyone's estimate says: CPU runs no longer wait behind a run that needs two
GPUs. Unlike Slurm's backfill, a lower job never borrows a device a higher job could use "until
that job's estimated start": Slurm ends a job at its time limit, while our lengths are estimates
(a run's ETA, the last like run's time) that nothing enforces, so a run that overran would push the
higher one back.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from workbench.runs.devices import DeviceRequest
from workbench.runs.scheduler.jobs import RUN, Job, Placement, kind_of, kinds
from workbench.workers.inventory import online_hosts
from workbench.workers.models import Device, WorkerHost


@dataclass
class Inventory:
    """Free and held devices on online hosts, read once per pass, and who holds each."""

    hosts: list[WorkerHost]
    free: dict[int, list[Device]]  # host id -> free devices
    held: dict[int, list[Device]]  # host id -> devices a job (or an administrator's hand) holds
    holder: dict[int, Job]  # device pk -> the job holding it, where a kind claims it

    @classmethod
    def load(cls) -> Inventory:
        hosts = list(online_hosts())
        devices = list(
            Device.objects.filter(host__in=hosts).select_related("run__dataset").order_by("host_id", "kind", "index")
        )
        free: dict[int, list[Device]] = defaultdict(list)
        held: dict[int, list[Device]] = defaultdict(list)
        for device in devices:
            (held if device.run_id or device.reserved_by else free)[device.host_id].append(device)
        holder: dict[int, Job] = {}
        for kind in kinds():
            holder.update(kind.holders(devices))
        return cls(hosts=hosts, free=free, held=held, holder=holder)

    def free_gpus(self, host: WorkerHost) -> list[Device]:
        return [d for d in self.free[host.pk] if d.kind == Device.Kind.GPU]

    def gpu_count(self, host: WorkerHost) -> int:
        return sum(1 for d in self.free[host.pk] + self.held[host.pk] if d.kind == Device.Kind.GPU)

    def gpus_held_by(self, kind: str) -> int:
        return sum(
            1
            for host in self.hosts
            for device in self.held[host.pk]
            if device.kind == Device.Kind.GPU and device.pk in self.holder and self.holder[device.pk].kind == kind
        )

    def reload(self) -> None:
        """See the world again (another pass took something this one meant to use)."""
        fresh = Inventory.load()
        self.hosts, self.free, self.held, self.holder = fresh.hosts, fresh.free, fresh.held, fresh.holder

    def without(self, reserved: Callable[[WorkerHost, Device], bool]) -> Inventory:
        """This inventory with the free devices `reserved` names counted as held (by nobody):
        what a job may take below waiting jobs of a higher priority. Hosts keep their size."""
        free: dict[int, list[Device]] = defaultdict(list)
        held: dict[int, list[Device]] = defaultdict(list)
        for host in self.hosts:
            for device in self.free[host.pk]:
                (held if reserved(host, device) else free)[host.pk].append(device)
            held[host.pk] += self.held[host.pk]
        return Inventory(hosts=self.hosts, free=free, held=held, holder=self.holder)

    def take(self, placement: Placement, job: Job) -> None:
        for device in placement.devices:
            self.free[placement.host.pk].remove(device)
            self.held[placement.host.pk].append(device)
            self.holder[device.pk] = job


def queue_order(jobs: list[Job]) -> list[Job]:
    """Priority first, then users interleaved in turns, then age."""
    turn_of: dict[tuple[str, int], int] = {}
    seen_per_user: dict[tuple[int, int], int] = defaultdict(int)
    for job in sorted(jobs, key=lambda j: (-j.priority, j.queued_at, j.kind, j.pk)):
        key = (job.priority, job.owner_id)
        turn_of[job.key] = seen_per_user[key]
        seen_per_user[key] += 1
    return sorted(jobs, key=lambda j: (-j.priority, turn_of[j.key], j.queued_at, j.kind, j.pk))


def _held_words(inventory: Inventory, device: Device) -> tuple[str, Job | None]:
    holder = inventory.holder.get(device.pk)
    if holder is None:
        return "something outside the queue", None
    return kind_of(holder).holder_words, holder


def find_placement(job: Job, inventory: Inventory) -> tuple[Placement | None, str, Job | None]:
    """Where the job could start now, or why it cannot (in plain words) and the job in the way.

    The words never name that job (its kind's `holder_words` stand for it): who may read its
    name depends on who looks, so each kind renders it for each viewer.
    """
    request = job.wants
    if not inventory.hosts:
        return None, "no worker online", None
    if request.is_cpu:
        for host in inventory.hosts:
            cpus = [d for d in inventory.free[host.pk] if d.kind == Device.Kind.CPU]
            if cpus:
                return Placement(host, cpus[:1]), "", None
        return None, "the CPU of every online worker is in use", None
    if request.is_specific:
        host = next((h for h in inventory.hosts if h.hostname == request.host), None)
        if host is None:
            return None, f"worker {request.host} is offline", None
        by_index = {d.index: d for d in inventory.free[host.pk] if d.kind == Device.Kind.GPU}
        held = {d.index: d for d in inventory.held[host.pk] if d.kind == Device.Kind.GPU}
        for index in request.indices:
            if index in held:
                words, holder = _held_words(inventory, held[index])
                return None, f"GPU {index} on {host.hostname} is in use by {words}", holder
            if index not in by_index:
                return None, f"{host.hostname} has no GPU {index}", None
        return Placement(host, [by_index[i] for i in request.indices]), "", None
    count = request.device_count  # an unresolved "auto" (an empty stored request) places as one GPU
    fitting = [(len(inventory.free_gpus(h)), h) for h in inventory.hosts if len(inventory.free_gpus(h)) >= count]
    if fitting:
        # Best fit: the host with the fewest free GPUs that suffice keeps big hosts whole for big jobs.
        _, host = min(fitting, key=lambda pair: (pair[0], pair[1].hostname))
        return Placement(host, inventory.free_gpus(host)[:count]), "", None
    largest = max(inventory.gpu_count(h) for h in inventory.hosts)
    plural = "s" if count != 1 else ""
    if largest < count:
        if largest == 0:
            return None, f"needs {count} GPU{plural}; no online worker has a GPU", None
        return None, f"needs {count} GPU{plural} on one host; the largest online host has {largest}", None
    most_free = max(len(inventory.free_gpus(h)) for h in inventory.hosts)
    # The runs are on the queue page for everyone; what else holds GPUs is named here.
    others = [
        f"{held} held by {kind.holder_words}"
        for kind in kinds()
        if kind.name != RUN and (held := inventory.gpus_held_by(kind.name))
    ]
    also = f" ({'; '.join(others)})" if others else ""
    return None, f"needs {count} GPU{plural} on one host, {most_free} free{also}", None


def could_use(request: DeviceRequest, host: WorkerHost, device: Device, inventory: Inventory) -> bool:
    """Whether find_placement could ever place a job asking `request` on `device` of `host`, now
    or later: its rules without what is free (a run on a CPU takes a CPU; GPUs come from one
    host big enough, the named ones where the request names them)."""
    if request.is_cpu:
        return device.kind == Device.Kind.CPU
    if device.kind != Device.Kind.GPU:
        return False
    if request.is_specific:
        return host.hostname == request.host and device.index in request.indices
    return inventory.gpu_count(host) >= request.device_count


class _Reach:
    """The devices (pks) each request could ever be placed on (`could_use`), worked out once per
    request in a pass: a queue of hundreds of jobs asks a handful of different requests, and the
    estimates play the pass many times over."""

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self._known: dict[DeviceRequest, frozenset[int]] = {}

    def of(self, request: DeviceRequest) -> frozenset[int]:
        if request not in self._known:
            inventory = self.inventory
            self._known[request] = frozenset(
                device.pk
                for host in inventory.hosts
                for device in inventory.free[host.pk] + inventory.held[host.pk]
                if could_use(request, host, device, inventory)
            )
        return self._known[request]


def _competing(job: Job, higher: list[Job], reach: _Reach) -> list[Job]:
    """The waiting jobs of `higher` (priority) that could use a device `job` could use: those it
    is behind. A CPU run is behind no run that needs GPUs; it waits for its CPU, and says so."""
    mine = reach.of(job.wants)
    return [other for other in higher if reach.of(other.wants) & mine]


def _backfill(job: Job, competing: list[Job], reach: _Reach) -> Placement | None:
    """Where `job` may start below the waiting jobs `competing` (of higher priority): only on
    devices none of them could use (the module's docstring says why no more)."""
    reserved = frozenset().union(*(reach.of(other.wants) for other in competing))
    return find_placement(job, reach.inventory.without(lambda host, device: device.pk in reserved))[0]


@dataclass
class Step:
    """What a pass decides for one job of the queue."""

    job: Job
    position: int  # in the queue, from 1
    # "not_ready" (its kind says why), "held" (its quota is spent), "behind" (jobs of higher
    # priority wait), "wait" (no placement now), "start", or "lost" (another pass claimed a
    # device or the job first)
    outcome: str
    placement: Placement | None = None
    reason: str = ""  # for "wait" and "held": why, with the holder's kind's words for `holder`
    holder: Job | None = None
    ahead: int = 0  # for "behind": how many


def plan(
    inventory: Inventory, queue: list[Job], *, claim: Callable[[Job, Placement], bool] | None = None
) -> Iterator[Step]:
    """The placement loop of a pass over `queue` (in queue order), one Step per job, `inventory`
    updated as jobs start. `claim` makes a start real (the pass: the job's kind claims it), False
    when another pass was first; without it the pass is a dry run in memory (the new-run form's
    preview, the estimates). A job that cannot start blocks lower priorities only on the devices
    it could use (backfill, the module's docstring)."""
    waiting: list[Job] = []
    reach = _Reach(inventory)
    for position, job in enumerate(queue, start=1):
        if not job.ready:
            yield Step(job, position, "not_ready")
            continue
        if job.held:  # a spent quota: it keeps its place and blocks no one (scheduler/quotas.py)
            yield Step(job, position, "held", reason=job.held)
            continue
        higher = [other for other in waiting if other.priority > job.priority]
        competing = _competing(job, higher, reach) if higher else []
        if competing:
            placement = _backfill(job, competing, reach)
            if placement is None:
                waiting.append(job)  # it waits too: what it could use is not for lower jobs either
                yield Step(job, position, "behind", ahead=len(competing))
                continue
            reason, holder = "", None
        else:
            placement, reason, holder = find_placement(job, inventory)
        if placement is None:
            waiting.append(job)
            yield Step(job, position, "wait", reason=reason, holder=holder)
        elif claim is None or claim(job, placement):
            inventory.take(placement, job)
            yield Step(job, position, "start", placement=placement)
        else:
            inventory.reload()
            reach = _Reach(inventory)  # the hosts online may have changed
            yield Step(job, position, "lost", placement=placement)
