"""What a benchmark's run writes as it goes: the cells measured, progress, the largest batches
found, its end (which gives its GPUs back), each published on commit. The runner and the queue
call these; a user's requests are services.py, which queues the tasks that call this module.

When a benchmark ends, `benchmark_ended` is sent after commit and receivers.py answers with a
scheduling pass (a module this low cannot queue tasks: the tasks import it).
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max
from django.dispatch import Signal
from django.utils import timezone

from trainer.bench import table as bench_table
from workbench.benchmarks.models import Benchmark, BenchmarkCell
from workbench.core.groups import group_publish
from workbench.projects.quotas import record_use
from workbench.workers.models import Device

# Sent (on commit) when a benchmark ended and gave its GPUs back.
benchmark_ended = Signal()


def publish(benchmark: Benchmark, message: dict) -> None:
    transaction.on_commit(lambda: group_publish(benchmark.group_name, {"type": "benchmark.update", **message}))


def publish_state(benchmark: Benchmark) -> None:
    fields = ("state", "reason", "wait_reason", "progress")
    publish(benchmark, {"kind": "state", **{name: getattr(benchmark, name) for name in fields}})


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
            if benchmark.started_at is not None:  # it held its GPUs until now: the quotas' ledger
                record_use(owner_id=benchmark.owner_id, project_id=benchmark.project_id, job_kind="benchmark",
                           job_id=benchmark.pk, start=benchmark.started_at, end=benchmark.finished_at,
                           gpus=len(benchmark.device_labels))  # fmt: skip
    if ended:
        # GPUs are free again: runs and benchmarks waiting for them may start (receivers.py).
        transaction.on_commit(lambda: benchmark_ended.send(sender=Benchmark, benchmark_id=benchmark.pk))
    return bool(ended)


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
