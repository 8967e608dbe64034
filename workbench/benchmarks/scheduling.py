"""The benchmarks' queue: a benchmark takes its GPUs to itself, all on one host, or waits with a
reason. It reserves them (`Device.reserved_by`) by conditional updates inside one transaction, so
neither a run nor another benchmark can be given them; the runs' scheduler leaves reserved
devices alone. Passes run on submission, on every heartbeat and when a benchmark ends.
"""

from __future__ import annotations

import logging

from celery import current_app
from django.db import DatabaseError, transaction
from django.utils import timezone

from workbench.benchmarks.lifecycle import benchmark_finish, publish_state
from workbench.benchmarks.models import Benchmark
from workbench.runs.scheduler import Inventory
from workbench.workers.inventory import lost_worker
from workbench.workers.models import Device, WorkerHost

log = logging.getLogger(__name__)

# The worker's task that measures one benchmark (tasks.run_benchmark), sent by its name: the tasks
# module imports this one, and a name is all a producer of a task needs.
RUN_TASK = "workbench.benchmarks.tasks.run_benchmark"


def reclaim_lost() -> int:
    """Running benchmarks of workers that went silent or restarted fail (their cells are kept)."""
    lost = 0
    for benchmark in Benchmark.objects.filter(state=Benchmark.State.RUNNING).select_related("host"):
        why = lost_worker(benchmark.host, benchmark.host_boot_id)
        if why:
            lost += benchmark_finish(
                benchmark=benchmark, state=Benchmark.State.FAILED, reason=f"{why}; the cells measured are kept"
            )
    return lost


def find_gpus(benchmark: Benchmark, inventory: Inventory) -> tuple[WorkerHost | None, list[Device], str]:
    """The host and free GPUs it would take now (best fit), or why it cannot start."""
    need = benchmark.gpus_needed
    plural = "s" if need != 1 else ""
    if not inventory.hosts:
        return None, [], "no worker online"
    free = {h.pk: len(inventory.free_gpus(h)) for h in inventory.hosts}
    fitting = [(free[h.pk], h.hostname, h) for h in inventory.hosts if free[h.pk] >= need]
    if fitting:
        _, _, host = min(fitting, key=lambda item: item[:2])
        return host, inventory.free_gpus(host)[:need], ""
    # Every GPU, reserved ones too (the runs' inventory leaves those out).
    gpus = Device.objects.filter(host__in=inventory.hosts, kind=Device.Kind.GPU)
    largest = max([gpus.filter(host=h).count() for h in inventory.hosts])
    if largest == 0:
        return None, [], f"needs {need} GPU{plural}; no online worker has a GPU"
    if largest < need:
        return None, [], f"needs {need} GPU{plural} on one host; the largest online host has {largest}"
    most_free = max(free.values())
    return None, [], f"needs {need} GPU{plural} on one host to itself; {most_free} free (the others are in use)"


def reserve(benchmark: Benchmark, host: WorkerHost, devices: list[Device]) -> bool:
    """Claims the benchmark and its GPUs in one transaction: all or nothing."""
    ids = [device.pk for device in devices]
    try:
        with transaction.atomic():
            started = Benchmark.objects.filter(pk=benchmark.pk, state__in=Benchmark.PENDING_STATES).update(
                state=Benchmark.State.RUNNING,
                host=host,
                host_boot_id=host.boot_id,
                started_at=timezone.now(),
                wait_reason="",
                reason=f"started on {host.hostname}: {', '.join(d.label for d in devices)}",
                # A simulated GPU's numbers are a CPU process's: the page must not pass them off as a GPU's.
                device_labels=[f"{host.hostname}: {d.label}{' (simulated)' if d.simulated else ''}" for d in devices],
            )
            taken = Device.objects.filter(pk__in=ids, run__isnull=True, reserved_by="").update(
                reserved_by=benchmark.reservation
            )
            if not started or taken != len(ids):
                transaction.set_rollback(True)
                return False
            benchmark.refresh_from_db()
            publish_state(benchmark)
            transaction.on_commit(lambda: launch(benchmark.pk, host.queue))
        return True
    except DatabaseError as error:
        log.info("benchmark %s yielded to another pass: %s", benchmark.pk, error)
        return False


def launch(benchmark_id: int, queue: str) -> None:
    try:
        current_app.send_task(RUN_TASK, args=[benchmark_id], queue=queue)
    except Exception:
        log.warning("could not send the launch of benchmark %s", benchmark_id)


def wait(benchmark: Benchmark, reason: str) -> None:
    if benchmark.state == Benchmark.State.WAITING and benchmark.wait_reason == reason:
        return
    updated = Benchmark.objects.filter(pk=benchmark.pk, state__in=Benchmark.PENDING_STATES).update(
        state=Benchmark.State.WAITING, wait_reason=reason, reason=f"waiting: {reason}"
    )
    if updated:
        benchmark.refresh_from_db()
        publish_state(benchmark)


def benchmark_pass() -> dict:
    """One pass, oldest first: start what fits now, say why the rest waits."""
    reclaimed = reclaim_lost()
    started = 0
    pending = Benchmark.objects.filter(state__in=Benchmark.PENDING_STATES).order_by("queued_at", "pk")
    for benchmark in pending:
        inventory = Inventory.load()
        host, devices, reason = find_gpus(benchmark, inventory)
        if host is None:
            wait(benchmark, reason)
        elif reserve(benchmark, host, devices):
            started += 1
    return {"reclaimed": reclaimed, "started": started}
