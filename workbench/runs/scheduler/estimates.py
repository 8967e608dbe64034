"""When each waiting job should start: the queue played forward with the pass's own placement."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from workbench.runs.scheduler.jobs import Job, kind_of
from workbench.runs.scheduler.placement import Inventory, plan


@dataclass
class _Seat:
    """A device in the estimate's play of the queue: who holds it, and when it comes free."""

    pk: int
    kind: str
    index: int
    free_at: datetime | None  # None: when is not known


def _inventory_at(inventory: Inventory, seats: dict[int, list[_Seat]], moment: datetime) -> Inventory:
    free: dict[int, list] = defaultdict(list)
    held: dict[int, list] = defaultdict(list)
    for host in inventory.hosts:
        for seat in seats[host.pk]:
            ready = seat.free_at is not None and seat.free_at <= moment
            (free if ready else held)[host.pk].append(seat)
    return Inventory(hosts=inventory.hosts, free=free, held=held, holder={})


def estimate_starts(waiting: list[Job], inventory: Inventory) -> dict[tuple[str, int], datetime | None]:
    """When each waiting job should start (by Job.key): the queue (`waiting`, in queue order)
    played forward with the pass's own placement loop (plan) over `inventory`, each held device
    coming free when its holder's time runs out, each job started in the play holding its devices
    for its own expected length. None where that rests on a job whose length nothing tells, or on
    a device held by something outside the queue."""
    now = timezone.now()
    lengths: dict[tuple[str, int], float | None] = {}

    def length_of(job: Job) -> float | None:
        if job.key not in lengths:
            lengths[job.key] = kind_of(job).seconds_left(job, now=now)
        return lengths[job.key]

    seats: dict[int, list[_Seat]] = defaultdict(list)
    for host in inventory.hosts:
        for device in inventory.free[host.pk]:
            seats[host.pk].append(_Seat(device.pk, device.kind, device.index, now))
        for device in inventory.held[host.pk]:
            holder = inventory.holder.get(device.pk)
            left = length_of(holder) if holder is not None else None
            free_at = None if left is None else now + timedelta(seconds=left)
            seats[host.pk].append(_Seat(device.pk, device.kind, device.index, free_at))
    estimates: dict[tuple[str, int], datetime | None] = {job.key: None for job in waiting}
    remaining, moment = list(waiting), now
    while remaining:
        for step in list(plan(_inventory_at(inventory, seats, moment), remaining)):
            if step.outcome != "start":
                continue
            estimates[step.job.key] = moment
            remaining.remove(step.job)
            length = length_of(step.job)
            for seat in step.placement.devices:
                seat.free_at = None if length is None else moment + timedelta(seconds=length)
        later = [seat.free_at for host in seats.values() for seat in host if seat.free_at and seat.free_at > moment]
        if not later:
            break
        moment = min(later)
    return estimates
