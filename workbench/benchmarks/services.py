"""What a user asks of benchmarks: submit (a table, or the new-run form's largest-batch finder)
and cancel. Keyword-only arguments. Imports run one way, services -> tasks -> runner and
scheduling -> lifecycle: what the tasks execute never imports this module."""

from __future__ import annotations

import logging

from django.db import transaction

from datasets.models import Dataset
from workbench.audit import services as audit
from workbench.benchmarks.lifecycle import benchmark_finish
from workbench.benchmarks.models import Benchmark
from workbench.benchmarks.validators import largest_batch_request, validate_benchmark_request
from workbench.core.errors import RequestError
from workbench.projects.selectors import project_of_new_work

# Benchmarks wait in the runs' one queue: a pass of it places them too.
from workbench.runs.services import queue_scheduling

log = logging.getLogger(__name__)


def benchmark_submit(*, owner, request: dict) -> Benchmark:
    """Checks the request (RequestError naming the field) and queues the benchmark."""
    cleaned = validate_benchmark_request(request, owner=owner)
    # Like a run, a benchmark on a project's dataset goes into that project (its GPU-hours count
    # there); on synthetic images, its owner's alone.
    dataset = Dataset.objects.filter(pk=cleaned["dataset"]).first() if cleaned.get("dataset") else None
    project = project_of_new_work(owner=owner, dataset=dataset) if dataset else None
    with transaction.atomic():
        benchmark = Benchmark.objects.create(
            owner=owner, name=cleaned.pop("name"), request=cleaned, reason="queued for its GPUs", project=project
        )
        transaction.on_commit(queue_scheduling)
        audit.record(action="benchmark.create", actor=owner, target=benchmark, after=cleaned)
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


def benchmark_cancel(*, benchmark: Benchmark) -> bool:
    """A waiting benchmark ends now; a running one is asked to stop (its runner signals the
    trainer and keeps the cells measured so far)."""
    before = {"state": benchmark.state}
    if benchmark.state in Benchmark.PENDING_STATES:
        if benchmark_finish(benchmark=benchmark, state=Benchmark.State.CANCELLED, reason="cancelled before it started"):
            audit.record(action="benchmark.cancel", target=benchmark, before=before, after={"state": "cancelled"})
            return True
        benchmark.refresh_from_db()
    if benchmark.state != Benchmark.State.RUNNING:
        return False
    asked = Benchmark.objects.filter(pk=benchmark.pk, state=Benchmark.State.RUNNING).update(cancel_requested=True)
    if asked:
        audit.record(action="benchmark.cancel", target=benchmark, before=before, after={"cancel_requested": True})
    return bool(asked)
