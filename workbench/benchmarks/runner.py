"""Runs one benchmark on this worker: writes the trainer's benchmark config, starts
`python -m trainer benchmark` on the reserved GPUs, stores each cell as it is measured, watches
for a cancel, and ends the benchmark (which gives the GPUs back)."""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import time

from django.conf import settings
from django.utils import timezone

from datasets.models import Dataset
from trainer import protocol
from workbench.benchmarks.lifecycle import benchmark_finish, cells_append, largest_batch_append, progress_update
from workbench.benchmarks.models import Benchmark
from workbench.runs.attempts import outcome
from workbench.runs.attempts.config import device_config
from workbench.runs.models import Run
from workbench.workers.following import follow_child
from workbench.workers.models import Device
from workbench.workers.processes import EventTail, GracefulStop, start_child

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5
# The executor end state of a benchmark stopped at its time budget: the table's time limit.
BUDGET_SPENT = "TIMEOUT"
CANCEL_GRACE_SECONDS = 10.0


def trainer_config(benchmark: Benchmark, devices: list[Device]) -> tuple[dict, dict[str, str]]:
    """The trainer's benchmark config and the environment that pins its GPUs. Simulated GPUs
    train on the CPU (one gloo process each) and bring their memory as the capacity to enforce."""
    request = benchmark.request
    stages = 1 if request["layout"] == "data" else int(request["layout"].split("x")[0])
    config = {
        "run_dir": str(benchmark.run_dir),
        "networks": request["networks"],
        "image_size": request["image_size"],
        "gpu_counts": request["gpus"],
        "batch_sizes": request["batch_sizes"],
        "precisions": [request["precision"]],
        "modes": request["modes"],
        "model_parallel": stages,
        "steps": request["steps"],
        "warmup_steps": request["warmup_steps"],
        "find_largest": request["find_largest"],
        # Requests stored before these fields existed measure as they did then.
        "find_limit": request.get("find_limit", 4096),
        "channels": request.get("channels", 3),
        "num_classes": request.get("num_classes", 1000),
    }
    if request.get("dataset"):
        config["data"] = str(Dataset.objects.get(pk=request["dataset"]).path)
    simulated = any(device.simulated for device in devices)
    pinned = device_config(gpu_indexes=[device.index for device in devices], simulated=simulated)
    config["devices"] = pinned.devices
    if pinned.on_cpu:
        config["memory_capacity_mb"] = min((device.memory_total_mb for device in devices), default=0) or None
    else:
        config["channels_last"] = True
    return config, pinned.env


def claim(benchmark_id: int) -> bool:
    """Only the first delivery of the launch starts a trainer."""
    return bool(
        Benchmark.objects.filter(pk=benchmark_id, state=Benchmark.State.RUNNING, launched=False).update(launched=True)
    )


def run_job(*, benchmark_id: int) -> str:
    if not claim(benchmark_id):
        return "duplicate"
    benchmark = Benchmark.objects.get(pk=benchmark_id)
    if benchmark.cancel_requested:
        benchmark_finish(benchmark=benchmark, state=Benchmark.State.CANCELLED, reason="cancelled before it started")
        return Benchmark.State.CANCELLED
    devices = list(Device.objects.filter(reserved_by=benchmark.reservation).order_by("index"))
    config, env = trainer_config(benchmark, devices)
    benchmark.run_dir.mkdir(parents=True, exist_ok=True)
    # A benchmark is one attempt: its files have the names a run's first attempt has.
    config_path = benchmark.run_dir / protocol.launch_name(1)
    config_path.write_text(json.dumps(config, indent=2))
    events_path = benchmark.run_dir / protocol.events_name(1)
    argv = [sys.executable, "-m", "trainer", "benchmark", "--config", str(config_path), "--events", str(events_path)]
    with (benchmark.run_dir / protocol.TRAINER_LOG).open("ab") as trainer_log:
        # Its own process group, so a cancel reaches every rank and data loader.
        process = start_child(argv, stdout=trainer_log, env=env, own_session=True)
    log.info("benchmark %s: trainer pid %s on %s", benchmark.pk, process.pid, config["devices"])
    return finish(benchmark, watch(benchmark, process, EventTail(events_path)))


def store(benchmark: Benchmark, events: list[dict]) -> dict:
    cells = [event for event in events if event.get("type") == protocol.CELL]
    if cells:
        cells_append(benchmark=benchmark, cells=cells)
    for event in events:
        if event.get("type") == protocol.LARGEST_BATCH:
            largest_batch_append(benchmark=benchmark, found=event)
    progress = next((e for e in reversed(events) if e.get("type") == protocol.PROGRESS), None)
    if progress is not None:
        progress_update(benchmark=benchmark, percent=float(progress.get("percent") or 0))
    return protocol.final_status(events)


def watch(benchmark: Benchmark, process: subprocess.Popen, tail: EventTail) -> outcome.Ending:
    """Stores the trainer's cells until it exits; stops it when the benchmark is cancelled or
    deleted, or its time budget is spent. A watch that fails takes the trainer with it (the one
    loop, workers.following) and fails the benchmark, which gives its GPUs back."""
    stop = GracefulStop.of_process(
        process, grace_seconds=CANCEL_GRACE_SECONDS, name=f"benchmark {benchmark.pk}'s trainer"
    )
    trainer = BenchmarkWatch(benchmark, tail, stop)
    try:
        code = follow_child(process, stop=stop, store=trainer.store, look=trainer.look, look_every=POLL_SECONDS)
    except BaseException as error:
        with contextlib.suppress(Exception):  # the database may be what failed: then lost-worker ends it
            reason = f"its worker stopped watching it ({type(error).__name__})"
            benchmark_finish(benchmark=benchmark, state=Benchmark.State.FAILED, reason=reason)
        raise
    return trainer.ending(code)


class BenchmarkWatch:
    """What the watch of a benchmark stores and looks at between the loop's turns."""

    def __init__(self, benchmark: Benchmark, tail: EventTail, stop: GracefulStop) -> None:
        self.benchmark, self.tail, self.stop = benchmark, tail, stop
        self.last_status: dict = {}
        self.deadline = time.monotonic() + benchmark.time_budget_seconds
        self.out_of_time = False
        self.superseded = False
        self.next_watched = 0.0

    def store(self) -> None:
        self.last_status = store(self.benchmark, self.tail.read()) or self.last_status

    def look(self) -> None:
        benchmark = self.benchmark
        if time.monotonic() >= self.next_watched:
            # Says the watch still follows its trainer: a late heartbeat then loses nothing.
            self.next_watched = time.monotonic() + settings.HEARTBEAT_SECONDS
            Benchmark.objects.filter(pk=benchmark.pk, state=Benchmark.State.RUNNING).update(watched_at=timezone.now())
        row = Benchmark.objects.filter(pk=benchmark.pk).values_list("state", "cancel_requested").first()
        # No row: the benchmark was deleted while it ran, and stops as a cancelled one does.
        state, cancel = row if row is not None else (None, True)
        if state is not None and state != Benchmark.State.RUNNING and not self.superseded:
            # Ended while we watched (declared lost): not a cancel anyone asked for; it changes nothing.
            self.superseded = True
            self.stop.kill()
        elif cancel:
            self.stop.request()
        elif time.monotonic() > self.deadline and not self.stop.requested:
            # Runs wait behind it on the budget's word (the queue's estimates count on it).
            self.out_of_time = True
            self.stop.request()

    def ending(self, code: int) -> outcome.Ending:
        # A cancel is the benchmark's abort, its budget spent its time limit: the outcome table
        # decides as for a run (a job past its time limit fails).
        request = Run.StopRequest.ABORT if self.stop.requested and not self.out_of_time else ""
        end = BUDGET_SPENT if self.out_of_time else ""
        message = self.last_status.get("message") or ""
        return outcome.Ending(code, stop_request=request, message=message, end_state=end, superseded=self.superseded)


# A benchmark has no pause and is not resumed: what the table decides for a run, for a benchmark.
_BENCHMARK_STATES = {
    Run.State.DONE: Benchmark.State.DONE,
    Run.State.ABORTED: Benchmark.State.CANCELLED,
    Run.State.FAILED: Benchmark.State.FAILED,
    Run.State.PAUSED: Benchmark.State.CANCELLED,
    Run.State.INTERRUPTED: Benchmark.State.FAILED,
}


def finish(benchmark: Benchmark, ending: outcome.Ending) -> str:
    decided = outcome.decide(ending)
    if decided.state == outcome.SUPERSEDED:
        return decided.state
    state = _BENCHMARK_STATES[decided.state]
    if ending.end_state == BUDGET_SPENT and decided.state == Run.State.FAILED:
        budget = benchmark.time_budget_seconds
        words = f"{budget / 60:g} min" if budget >= 60 else f"{budget:.0f} s"
        reason = f"stopped at its time budget of {words}; the {benchmark.cells.count()} cells measured are kept"
    elif state == Benchmark.State.CANCELLED:
        reason = f"cancelled by the user; {benchmark.cells.count()} cells measured are kept"
    elif decided.state == Run.State.INTERRUPTED:
        reason = f"{decided.reason}; the cells measured are kept"
    else:
        reason = decided.reason
    benchmark_finish(benchmark=benchmark, state=state, reason=reason)
    return state
