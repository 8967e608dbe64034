"""The queue and the allocation of devices.

One scheduling pass: reclaim runs of lost workers, then walk the pending runs in queue order and
start each one whose devices are free. Passes may run at the same time in several processes
(every heartbeat and every submission triggers one): correctness rests on conditional updates
inside one transaction per start, never on there being a single scheduler.

Queue order: higher priority first; within a priority, users take turns (each user's first
waiting run, then each user's second...), oldest first within a turn, so one user's hundred runs
cannot starve another user's one. A run that cannot start blocks only lower priorities: runs of
the same priority may start around it when what they need is free (backfill).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, transaction
from django.db.models import F
from django.utils import timezone

from datasets.models import Dataset
from workbench.runs.attempts import gates
from workbench.runs.devices import DeviceRequest
from workbench.runs.lifecycle import interrupt, run_transition
from workbench.runs.models import HOLDER_WORDS, Run, wait_text_for
from workbench.workers.inventory import lost_worker, online_hosts
from workbench.workers.models import Device, WorkerHost

log = logging.getLogger(__name__)

# The worker's task that runs one attempt (tasks.train_run, the local executor's), sent by its
# name: the tasks module imports this one, and a name is all a producer of a task needs.
TRAIN_TASK = "workbench.runs.tasks.train_run"


class AllocationConflict(Exception):
    """Another pass took a device or the run first; this pass leaves it to them."""


@dataclass
class Placement:
    host: WorkerHost
    devices: list[Device]


@dataclass
class Inventory:
    """Free and held devices on online hosts, read once per pass."""

    hosts: list[WorkerHost]
    free: dict[int, list[Device]]  # host id -> free devices
    held: dict[int, list[Device]]  # host id -> devices held by runs
    # host id -> devices a benchmark holds to itself (Device.reserved_by): never offered, but
    # counted in the host's size and named in wait reasons.
    reserved: dict[int, list[Device]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def load(cls) -> Inventory:
        hosts = list(online_hosts())
        free: dict[int, list[Device]] = defaultdict(list)
        held: dict[int, list[Device]] = defaultdict(list)
        reserved: dict[int, list[Device]] = defaultdict(list)
        devices = Device.objects.filter(host__in=hosts)
        for device in devices.select_related("run").order_by("host_id", "kind", "index"):
            (reserved if device.reserved_by else held if device.run_id else free)[device.host_id].append(device)
        return cls(hosts=hosts, free=free, held=held, reserved=reserved)

    def free_gpus(self, host: WorkerHost) -> list[Device]:
        return [d for d in self.free[host.pk] if d.kind == Device.Kind.GPU]

    def gpu_count(self, host: WorkerHost) -> int:
        devices = self.free[host.pk] + self.held[host.pk] + self.reserved[host.pk]
        return sum(1 for d in devices if d.kind == Device.Kind.GPU)

    def reserved_gpus(self) -> int:
        return sum(1 for host in self.hosts for d in self.reserved[host.pk] if d.kind == Device.Kind.GPU)

    def reload(self) -> None:
        """See the world again (another pass took something this one meant to use)."""
        fresh = Inventory.load()
        self.hosts, self.free, self.held, self.reserved = fresh.hosts, fresh.free, fresh.held, fresh.reserved

    def take(self, placement: Placement, run: Run) -> None:
        for device in placement.devices:
            device.run = run
            self.free[placement.host.pk].remove(device)
            self.held[placement.host.pk].append(device)


def queue_order(runs: list[Run]) -> list[Run]:
    """Priority first, then users interleaved in turns, then age."""
    turn_of: dict[int, int] = {}
    seen_per_user: dict[tuple[int, int], int] = defaultdict(int)
    for run in sorted(runs, key=lambda r: (-r.priority, r.queued_at, r.pk)):
        key = (run.priority, run.owner_id)
        turn_of[run.pk] = seen_per_user[key]
        seen_per_user[key] += 1
    return sorted(runs, key=lambda r: (-r.priority, turn_of[r.pk], r.queued_at, r.pk))


# ------------------------------------------------------------------------------- placement


def find_placement(run: Run, inventory: Inventory) -> tuple[Placement | None, str, Run | None]:
    """Where the run could start now, or why it cannot (in plain words) and the run in the way.

    The words never name that run (HOLDER_WORDS stands for it): who may read its name depends on
    who looks, so Run.wait_reason_for renders it for each viewer.
    """
    request = run.devices_wanted
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
        wanted = request.indices
        by_index = {d.index: d for d in inventory.free[host.pk] if d.kind == Device.Kind.GPU}
        held = {d.index: d for d in inventory.held[host.pk] if d.kind == Device.Kind.GPU}
        reserved = {d.index for d in inventory.reserved[host.pk] if d.kind == Device.Kind.GPU}
        for index in wanted:
            if index in reserved:
                return None, f"GPU {index} on {host.hostname} is reserved by a benchmark", None
            if index in held:
                return None, f"GPU {index} on {host.hostname} is in use by {HOLDER_WORDS}", held[index].run
            if index not in by_index:
                return None, f"{host.hostname} has no GPU {index}", None
        return Placement(host, [by_index[i] for i in wanted]), "", None
    count = request.device_count  # an unresolved "auto" (an empty stored request) places as one GPU
    fitting = [(len(inventory.free_gpus(h)), h) for h in inventory.hosts if len(inventory.free_gpus(h)) >= count]
    if fitting:
        # Best fit: the host with the fewest free GPUs that suffice keeps big hosts whole for big runs.
        _, host = min(fitting, key=lambda pair: (pair[0], pair[1].hostname))
        return Placement(host, inventory.free_gpus(host)[:count]), "", None
    largest = max(inventory.gpu_count(h) for h in inventory.hosts)
    plural = "s" if count != 1 else ""
    if largest < count:
        if largest == 0:
            return None, f"needs {count} GPU{plural}; no online worker has a GPU", None
        return None, f"needs {count} GPU{plural} on one host; the largest online host has {largest}", None
    most_free = max(len(inventory.free_gpus(h)) for h in inventory.hosts)
    reserved = inventory.reserved_gpus()
    benchmarks = f" ({reserved} reserved by a benchmark)" if reserved else ""
    return None, f"needs {count} GPU{plural} on one host, {most_free} free{benchmarks}", None


@dataclass
class _Seat:
    """A device in the estimate's play of the queue: who holds it, and when it comes free."""

    pk: int
    kind: str
    index: int
    run: Run | None
    free_at: timezone.datetime | None  # None: when is not known


def expected_seconds(run: Run, *, now: timezone.datetime) -> float | None:
    """Time `run` still needs: its last reported ETA (a paused or interrupted run keeps it), else
    the length of the last done run like it (network, dataset, devices, epochs, batch), less what
    it has run already. None when nothing says."""
    if run.eta_seconds is not None:
        return run.eta_seconds
    likes = Run.objects.filter(
        state=Run.State.DONE, network=run.network, dataset_id=run.dataset_id, started_at__isnull=False
    ).exclude(pk=run.pk)
    for like in likes.order_by("-finished_at")[:20]:
        same = all(like.config.get(key) == run.config.get(key) for key in ("epochs", "batch_size"))
        if same and like.device_request == run.device_request and like.finished_at:
            ran = (now - run.started_at).total_seconds() if run.state == Run.State.RUNNING and run.started_at else 0
            left = (like.finished_at - like.started_at).total_seconds() - ran
            return left if left > 0 else None
    return None


def _inventory_at(hosts: list[WorkerHost], seats: dict[int, list[_Seat]], moment) -> Inventory:
    free: dict[int, list] = defaultdict(list)
    held: dict[int, list] = defaultdict(list)
    for host in hosts:
        for seat in seats[host.pk]:
            ready = seat.free_at is not None and seat.free_at <= moment
            (free if ready else held)[host.pk].append(seat)
    return Inventory(hosts=hosts, free=free, held=held)


def estimate_starts(waiting: list[Run], inventory: Inventory) -> dict[int, timezone.datetime | None]:
    """When each waiting run should start: the queue (`waiting`, in queue order) played forward
    with the scheduler's own placement loop (plan) over `inventory`, each held device coming free
    when its holder's time runs out, each run started in the play holding its devices for its
    own expected length. None where that rests on a run whose length nothing tells."""
    now = timezone.now()
    lengths: dict[int, float | None] = {}

    def length_of(run: Run) -> float | None:
        if run.pk not in lengths:
            lengths[run.pk] = expected_seconds(run, now=now)
        return lengths[run.pk]

    seats: dict[int, list[_Seat]] = defaultdict(list)
    for host in inventory.hosts:
        for device in inventory.free[host.pk] + inventory.held[host.pk]:
            left = length_of(device.run) if device.run else 0
            free_at = None if left is None else now + timedelta(seconds=left)
            seats[host.pk].append(_Seat(device.pk, device.kind, device.index, device.run, free_at))
    estimates: dict[int, timezone.datetime | None] = {run.pk: None for run in waiting}
    remaining, moment = list(waiting), now
    while remaining:
        for step in list(plan(_inventory_at(inventory.hosts, seats, moment), remaining)):
            if step.outcome != "start":
                continue
            estimates[step.run.pk] = moment
            remaining.remove(step.run)
            length = length_of(step.run)
            for seat in step.placement.devices:
                seat.free_at = None if length is None else moment + timedelta(seconds=length)
        later = [seat.free_at for host in seats.values() for seat in host if seat.free_at and seat.free_at > moment]
        if not later:
            break
        moment = min(later)
    return estimates


# ------------------------------------------------------------------------------- allocation


def allocate(run: Run, placement: Placement) -> bool:
    """Claims the run and its devices in one transaction: all or nothing; False on a conflict."""
    device_ids = sorted(device.pk for device in placement.devices)
    attempt = run.attempt + 1
    try:
        with transaction.atomic():
            # The run first: its row lock makes a second pass wait here, then find it running.
            started = run_transition(
                run=run,
                to_state=Run.State.RUNNING,
                from_states=Run.PENDING_STATES,
                reason=f"started on {placement.host.hostname}: {', '.join(d.label for d in placement.devices)}",
                host=placement.host,
                host_boot_id=placement.host.boot_id,
                attempt=attempt,
                started_at=timezone.now(),
                wait_reason="",
                wait_holder=None,
                estimated_start=None,
            )
            if not started:
                raise AllocationConflict
            taken = Device.objects.filter(pk__in=device_ids, run__isnull=True, reserved_by="").update(run=run)
            if taken != len(device_ids):
                raise AllocationConflict
            transaction.on_commit(lambda: launch(run.pk, attempt, placement.host.queue))
        return True
    except AllocationConflict:
        run.refresh_from_db()
        return False
    except DatabaseError as error:
        # PostgreSQL may break a lock cycle between two passes by failing one: that pass just yields.
        log.info("allocation of run %s yielded to another pass: %s", run.pk, error)
        return False


def launch(run_id: int, attempt: int, queue: str) -> bool:
    """Sends the launch message of one attempt; False when the broker cannot take it (the run
    is placed all the same, and relaunch_unclaimed of a later pass sends it again)."""
    try:
        current_app.send_task(TRAIN_TASK, args=[run_id, attempt], queue=queue)
    except Exception:
        log.warning("could not send the launch of run %s attempt %s; a later pass resends it", run_id, attempt)
        return False
    return True


def relaunch_unclaimed() -> int:
    """Placed runs whose launch no worker claimed (the message was lost: the broker was down when
    it was sent) get it again. After a grace of two worker timeouts, so a message that is merely
    queued is not doubled often; a double is harmless anyway, since a task claims by attempt."""
    grace = 2 * settings.WORKER_TIMEOUT_SECONDS
    cutoff = timezone.now() - timedelta(seconds=grace)
    unclaimed = Run.objects.filter(
        state=Run.State.RUNNING,
        executor=Run.Executor.LOCAL,
        trainer_pid__isnull=True,
        launched_attempt__lt=F("attempt"),
        started_at__lt=cutoff,
    ).select_related("host")
    sent = 0
    for run in unclaimed:
        if run.host is None or lost_worker(run.host, run.host_boot_id):
            continue
        # At most once per grace period and attempt, whichever worker's pass gets here first: a
        # launch that is merely waiting for a free worker thread must not pile up copies.
        placed = f"{run.pk}:{run.attempt}:{run.started_at.timestamp()}"  # this placement, not a reused id
        if cache.add(f"workbench:relaunched:{placed}", True, timeout=grace):
            sent += launch(run.pk, run.attempt, run.host.queue)
    return sent


# ------------------------------------------------------------------------------- the pass


def reclaim_lost_runs() -> int:
    """Runs whose worker stopped sending heartbeats, or restarted, are interrupted (or failed)."""
    reclaimed = 0
    # A Slurm run has no worker of ours: Slurm keeps it, and its follower (executors/slurm) follows it.
    for run in Run.objects.filter(state=Run.State.RUNNING, executor=Run.Executor.LOCAL).select_related("host"):
        why = lost_worker(run.host, run.host_boot_id)
        if why:
            reclaimed += interrupt(run, why)
    return reclaimed


def _set_waiting(run: Run, state: str, reason: str, estimate, holder: Run | None = None) -> None:
    holder_id = holder.pk if holder is not None else None
    if (
        run.state == state
        and run.wait_reason == reason
        and run.wait_holder_id == holder_id
        and run.estimated_start == estimate
    ):
        return
    if run.state != state and run.state != Run.State.INTERRUPTED:
        # The timeline keeps the neutral words: it is read by the run's owner, not the holder's.
        run_transition(run=run, to_state=state, from_states=[run.state], reason=reason)
    Run.objects.filter(pk=run.pk, state__in=Run.PENDING_STATES).update(
        wait_reason=reason, wait_holder=holder, estimated_start=estimate
    )


@dataclass
class Step:
    """What a pass decides for one run of the queue."""

    run: Run
    position: int  # in the queue, from 1
    # "dataset" (not ready), "behind" (runs of higher priority wait), "wait" (no placement now),
    # "start", or "lost" (another pass claimed a device or the run first)
    outcome: str
    placement: Placement | None = None
    reason: str = ""  # for "wait": why, with HOLDER_WORDS for `holder`
    holder: Run | None = None
    ahead: int = 0  # for "behind": how many


def plan(inventory: Inventory, queue: list[Run], *, claim: Callable[[Run, Placement], bool] | None = None):
    """The placement loop of a pass over `queue` (in queue order), one Step per run, `inventory`
    updated as runs start. `claim` makes a start real (schedule: allocate), False when another
    pass was first; without it the pass is a dry run in memory (the new-run form's preview).
    A run that cannot start blocks only lower priorities (backfill)."""
    waiting: list[int] = []
    for position, run in enumerate(queue, start=1):
        if run.dataset.status != Dataset.Status.READY:
            yield Step(run, position, "dataset")
            continue
        ahead = sum(1 for priority in waiting if priority > run.priority)
        if ahead:
            yield Step(run, position, "behind", ahead=ahead)
            continue
        placement, reason, holder = find_placement(run, inventory)
        if placement is None:
            waiting.append(run.priority)
            yield Step(run, position, "wait", reason=reason, holder=holder)
        elif claim is None or claim(run, placement):
            inventory.take(placement, run)
            yield Step(run, position, "start", placement=placement)
        else:
            inventory.reload()
            yield Step(run, position, "lost", placement=placement)


def _dataset_not_ready(run: Run) -> None:
    if gates.dataset_gate(run) == "building":
        _set_waiting(run, Run.State.QUEUED, "dataset still building", None)


def schedule() -> dict:
    """One scheduling pass; returns counts for logs and tests."""
    reclaimed = reclaim_lost_runs()
    relaunched = relaunch_unclaimed()
    pending = list(
        Run.objects.filter(state__in=Run.PENDING_STATES, executor=Run.Executor.LOCAL).select_related("dataset", "owner")
    )
    inventory = Inventory.load()
    started = 0
    steps = list(plan(inventory, queue_order(pending), claim=allocate))
    estimates = estimate_starts([step.run for step in steps if step.outcome in ("behind", "wait")], inventory)
    for step in steps:
        run = step.run
        if step.outcome == "dataset":
            _dataset_not_ready(run)
        elif step.outcome == "behind":
            reason = f"behind {step.ahead} run{'s' if step.ahead != 1 else ''} of higher priority"
            _set_waiting(run, Run.State.WAITING, reason, estimates[run.pk])
        elif step.outcome == "wait":
            _set_waiting(run, Run.State.WAITING, step.reason, estimates[run.pk], step.holder)
        started += step.outcome == "start"
    return {"reclaimed": reclaimed, "relaunched": relaunched, "started": started, "pending": len(pending) - started}


def placement_preview(*, user, request: DeviceRequest | dict) -> dict:
    """Would a run asking for `request` (resolved: not "auto") start now, or wait, and at which
    queue position? The scheduler's own pass, dry, over the queue with this run added."""
    probe = Run(
        owner=user,
        name="(this run)",
        device_request=DeviceRequest.of(request).to_dict(),
        priority=0,
        state=Run.State.QUEUED,
        queued_at=timezone.now(),
        dataset=Dataset(status=Dataset.Status.READY),
    )
    probe.pk = -1
    order = queue_order([*(run for run in queue_positions() if not run.on_slurm), probe])
    step = next(step for step in plan(Inventory.load(), order) if step.run is probe)
    if step.outcome == "start":
        where = ", ".join(device.label for device in step.placement.devices)
        message = f"Starts now on {step.placement.host.hostname}: {where}."
        return {"start_now": True, "position": None, "queue_length": len(order) - 1, "message": message}
    if step.outcome == "behind":
        why = "behind runs of higher priority"
    else:
        why = wait_text_for(step.reason, holder=step.holder, viewer=user)
    message = f"Waits in the queue at position {step.position} of {len(order)}: {why}."
    return {"start_now": False, "position": step.position, "queue_length": len(order), "message": message}


def queue_rows() -> list[tuple[int | None, Run]]:
    """(position, run) of every waiting run for the queue page and API: the workbench's own queue
    numbered in the order it will be considered, then the runs waiting in Slurm's queue, which
    has its own order (position None: Slurm's reason says why they wait)."""
    runs = queue_positions()
    local = [run for run in runs if not run.on_slurm]
    on_slurm = sorted((run for run in runs if run.on_slurm), key=lambda run: (run.queued_at, run.pk))
    return [*enumerate(local, start=1), *((None, run) for run in on_slurm)]


def queue_positions() -> list[Run]:
    """The waiting runs in the order they will be considered, for the queue page and API."""
    pending = Run.objects.filter(state__in=Run.PENDING_STATES).select_related("dataset", "owner", "wait_holder")
    return queue_order(list(pending))
