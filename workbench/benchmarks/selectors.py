"""Reads of benchmarks for a user, through the one rule of who may see a row (workbench/core/
ownership.py: the same 404 for missing and not yours), and the one shape a benchmark takes in the
API, the page and the socket: its state and its cells, derived."""

from __future__ import annotations

from django.shortcuts import get_object_or_404

from trainer.bench import table as bench_table
from workbench.benchmarks.models import Benchmark, BenchmarkCell
from workbench.core.ownership import row_to_change


def benchmarks_visible_to(user):
    return Benchmark.objects.visible_to(user).select_related("owner")


def benchmark_for(user, pk: int) -> Benchmark:
    return get_object_or_404(benchmarks_visible_to(user), pk=pk)


def benchmark_to_change(user, pk: int) -> Benchmark:
    """The benchmark to cancel or share: Http404 as benchmark_for, and 403 naming the user's
    role when they may see it through a project but not change it."""
    return row_to_change(Benchmark.objects.select_related("owner"), user, pk, noun="benchmark")


def cells_of(benchmark: Benchmark) -> list[dict]:
    return [cell.data for cell in benchmark.cells.all()]


def summary(benchmark: Benchmark) -> dict:
    return {
        "id": benchmark.pk,
        "name": benchmark.name,
        "owner": benchmark.owner.username,
        "project": benchmark.project.slug if benchmark.project_id else None,
        "state": benchmark.state,
        "reason": benchmark.reason,
        "wait_reason": benchmark.wait_reason,
        "estimated_start": benchmark.estimated_start.isoformat() if benchmark.estimated_start else None,
        "time_budget_minutes": benchmark.time_budget_seconds / 60,
        "progress": round(benchmark.progress, 4),
        "request": benchmark.request,
        "devices": benchmark.device_labels,
        "queued_at": benchmark.queued_at.isoformat(),
        "started_at": benchmark.started_at.isoformat() if benchmark.started_at else None,
        "finished_at": benchmark.finished_at.isoformat() if benchmark.finished_at else None,
    }


def benchmark_payload(benchmark: Benchmark) -> dict:
    """The summary, every cell with its speed-up and efficiency, and the tables they make."""
    cells = bench_table.derive(cells_of(benchmark))
    return {
        **summary(benchmark),
        "cells": cells,
        "tables": bench_table.tables(cells),
        "largest_batches": benchmark.largest_batches,
    }


def largest_batch_answer(benchmark: Benchmark) -> dict:
    """The run form's finder as it stands: waiting (why), running, or its answer, the run's
    global batch (per-GPU batch found x the processes the run splits it over)."""
    request = benchmark.request
    stages = 1 if request.get("layout", "data") == "data" else int(request["layout"].split("x")[0])
    processes = max(1, (request.get("gpus") or [1])[0] // stages)
    found = (benchmark.largest_batches or [{}])[0]
    per_gpu = found.get("batch_size")
    return {
        "id": benchmark.pk,
        "state": benchmark.state,
        "reason": benchmark.reason,
        "wait_reason": benchmark.wait_reason,
        "devices": benchmark.device_labels,
        "per_gpu_batch": per_gpu,
        "processes": processes,
        "batch_size": per_gpu * processes if per_gpu else None,
        "limit": found.get("limit"),
        "message": found.get("message", ""),
    }


def comparable_with(benchmark: Benchmark, candidates, *, most: int = 100) -> list[Benchmark]:
    """Of `candidates` (the viewer's benchmarks), those sharing at least one cell with `benchmark`
    (bench_table.compare's key): a compare link to one with none would open an empty table."""
    keys = {bench_table.cell_key(cell) for cell in cells_of(benchmark)}
    if not keys:
        return []
    others = list(candidates.exclude(pk=benchmark.pk)[:most])
    shared = {
        cell.benchmark_id
        for cell in BenchmarkCell.objects.filter(benchmark__in=others)
        if bench_table.cell_key(cell.data) in keys
    }
    return [other for other in others if other.pk in shared]
