"""Writes of benchmarks: submit, cancel, store what the trainer measured, finish (releasing the
GPUs it held). Keyword-only arguments; live messages go out on commit."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from trainer import bench_table
from workbench.benchmarks.models import Benchmark, BenchmarkCell
from workbench.benchmarks.validators import largest_batch_request, validate_benchmark_request
from workbench.core.errors import RequestError
from workbench.core.groups import group_publish
from workbench.workers.models import Device

log = logging.getLogger(__name__)


def publish(benchmark: Benchmark, message: dict) -> None:
    transaction.on_commit(lambda: group_publish(benchmark.group_name, {"type": "benchmark.update", **message}))


def publish_state(benchmark: Benchmark) -> None:
    fields = ("state", "reason", "wait_reason", "progress")
    publish(benchmark, {"kind": "state", **{name: getattr(benchmark, name) for name in fields}})


def queue_scheduling() -> None:
    # Inside: the tasks module imports the scheduling module, which imports this one.
    from workbench.benchmarks.tasks import schedule_benchmarks  # the tasks module imports this one

    try:
        schedule_benchmarks.delay()
    except Exception:
        # No broker right now: the workers' heartbeats schedule on their own every few seconds.
        log.warning("could not queue a benchmark scheduling pass; the next heartbeat runs one")


def benchmark_submit(*, owner, request: dict) -> Benchmark:
    """Checks the request (RequestError naming the field) and queues the benchmark."""
    cleaned = validate_benchmark_request(request, owner=owner)
    with transaction.atomic():
        benchmark = Benchmark.objects.create(
            owner=owner, name=cleaned.pop("name"), request=cleaned, reason="queued for its GPUs"
        )
        transaction.on_commit(queue_scheduling)
    return benchmark


# The benchmark's names for what the run form's finder sends, so a refusal names the form's field.
_FINDER_FIELD = {
    "data": "dataset",
    "networks": "network",
    "layout": "model_parallel",
    "image_size": "crop_size",
    "find_limit": "dataset",
}


def largest_batch_submit(*, owner, request: dict) -> Benchmark:
    """The new-run form's "find the largest batch": a one-cell benchmark with the finder, queued
    for the run's GPUs like any benchmark (they are its own while it measures)."""
    try:
        benchmark_request, _ = largest_batch_request(request, owner=owner)
        return benchmark_submit(owner=owner, request=benchmark_request)
    except RequestError as error:
        raise RequestError.of([(_FINDER_FIELD.get(f or "", f), text) for f, text in error.errors]) from None


def benchmark_finish(*, benchmark: Benchmark, state: str, reason: str) -> bool:
    """Ends an active benchmark and gives its GPUs back; False if it had already ended."""
    with transaction.atomic():
        ended = Benchmark.objects.filter(pk=benchmark.pk, state__in=Benchmark.ACTIVE_STATES).update(
            state=state, reason=reason[:500], wait_reason="", finished_at=timezone.now()
        )
        Device.objects.filter(reserved_by=benchmark.reservation).update(reserved_by="")
        if ended:
            benchmark.refresh_from_db()
            publish_state(benchmark)
    if ended:
        # GPUs are free again: runs and benchmarks waiting for them may start.
        transaction.on_commit(queue_scheduling)
    return bool(ended)


def benchmark_cancel(*, benchmark: Benchmark) -> bool:
    """A waiting benchmark ends now; a running one is asked to stop (its runner signals the
    trainer and keeps the cells measured so far)."""
    if benchmark.state in Benchmark.PENDING_STATES:
        if benchmark_finish(benchmark=benchmark, state=Benchmark.State.CANCELLED, reason="cancelled before it started"):
            return True
        benchmark.refresh_from_db()
    if benchmark.state != Benchmark.State.RUNNING:
        return False
    return bool(Benchmark.objects.filter(pk=benchmark.pk, state=Benchmark.State.RUNNING).update(cancel_requested=True))


def cells_append(*, benchmark: Benchmark, cells: list[dict]) -> list[BenchmarkCell]:
    """Stores measured cells in order and publishes them (derived against every stored cell)."""
    with transaction.atomic():
        last = benchmark.cells.aggregate(last=Max("seq"))["last"] or 0
        rows = BenchmarkCell.objects.bulk_create(
            BenchmarkCell(
                benchmark=benchmark,
                seq=last + number,
                network=str(cell.get("network", "")),
                gpus=int(cell.get("gpus") or 0),
                batch_size=int(cell.get("batch_size") or 0),
                status=str(cell.get("status", "error")),
                data={k: v for k, v in cell.items() if k not in ("type", "time")},
            )
            for number, cell in enumerate(cells, 1)
        )
        every = bench_table.derive([row.data for row in benchmark.cells.all()])
        publish(benchmark, {"kind": "cells", "cells": every})
    return rows


def progress_update(*, benchmark: Benchmark, percent: float) -> None:
    benchmark.progress = min(max(percent / 100.0, 0.0), 1.0)
    Benchmark.objects.filter(pk=benchmark.pk).update(progress=benchmark.progress)
    publish_state(benchmark)


def largest_batch_append(*, benchmark: Benchmark, found: dict) -> None:
    benchmark.largest_batches = [*benchmark.largest_batches, {k: v for k, v in found.items() if k not in ("type",)}]
    Benchmark.objects.filter(pk=benchmark.pk).update(largest_batches=benchmark.largest_batches)
    publish(benchmark, {"kind": "largest_batch", "largest_batches": benchmark.largest_batches})
