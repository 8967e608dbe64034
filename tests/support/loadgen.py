"""Concurrent submitters and finishers against the real database, for the allocation tests and the
scheduling benchmark. Each function runs in its own process (multiprocessing, spawn) and sets up
Django itself, so the processes contend like several web servers and workers would.
"""

from __future__ import annotations

import os
import random
import threading
import time


def _setup(env: dict[str, str]) -> None:
    os.environ.update(env)
    import django

    django.setup()


def submitter(env: dict[str, str], owner_ids: list[int], dataset_id: int, requests: list[dict], start_at: float) -> int:
    """Submits runs (each followed by a scheduling pass, as the web layer triggers one)."""
    _setup(env)
    from django.contrib.auth import get_user_model

    from datasets.models import Dataset
    from workbench.runs.scheduler import schedule
    from workbench.runs.services import run_create

    owners = list(get_user_model().objects.filter(pk__in=owner_ids))
    dataset = Dataset.objects.get(pk=dataset_id)
    time.sleep(max(0.0, start_at - time.time()))
    for number, request in enumerate(requests):
        run_create(
            owner=owners[number % len(owners)],
            dataset=dataset,
            name=f"load-{os.getpid()}-{number}",
            network="lenet",
            config={},
            device_request=request,
        )
        schedule()
    return len(requests)


def finisher(env: dict[str, str], total_runs: int, hold_seconds: float, deadline: float, seed: int) -> int:
    """Plays the trainers: ends each running run after about `hold_seconds`, then schedules."""
    _setup(env)
    rng = random.Random(seed)
    finished = 0
    stop = threading.Event()
    beat = threading.Thread(target=_play_heartbeats, args=(stop,), daemon=True)
    beat.start()
    try:
        finished = _finish_runs(total_runs, hold_seconds, deadline, rng)
    finally:
        stop.set()
        beat.join()
    return finished


def _play_heartbeats(stop: threading.Event) -> None:
    """The simulated hosts have no worker behind them: their heartbeat, and the watch of the runs
    they run, are played here, in a thread of their own as a worker's are, so that a slow pass
    of the finisher on a loaded machine does not make its hosts look dead."""
    from django.db import connection
    from django.utils import timezone

    from workbench.runs.models import Run
    from workbench.workers.models import WorkerHost

    try:
        while not stop.wait(0.5):
            now = timezone.now()
            WorkerHost.objects.filter(hostname__endswith="@simulated").update(last_seen=now)
            Run.objects.filter(state=Run.State.RUNNING, name__startswith="load-").update(watched_at=now)
    finally:
        connection.close()


def _finish_runs(total_runs: int, hold_seconds: float, deadline: float, rng: random.Random) -> int:
    from workbench.runs.lifecycle import run_finish
    from workbench.runs.models import Run
    from workbench.runs.scheduler import schedule

    finished = 0
    while time.time() < deadline:
        running = list(Run.objects.filter(state=Run.State.RUNNING, name__startswith="load-"))
        ended = Run.objects.filter(state=Run.State.DONE, name__startswith="load-").count()
        if ended >= total_runs:
            break
        for run in running:
            if (time.time() - run.started_at.timestamp()) >= hold_seconds * rng.uniform(0.5, 1.5):
                if run_finish(run=run, to_state=Run.State.DONE, reason="finished (simulated)"):
                    finished += 1
                    schedule()
        schedule()
        time.sleep(0.02)
    return finished


def check_allocations() -> list[str]:
    """Problems with the allocation state, or an empty list: what must hold at every moment."""
    from workbench.runs.models import Run
    from workbench.workers.models import Device

    problems = []
    for run in Run.objects.prefetch_related("devices"):
        count = len(run.devices.all())
        if run.state == Run.State.RUNNING:
            if count != run.devices_wanted.device_count:
                problems.append(f"run {run.pk} is running with {count} devices, asked for {run.device_request}")
            if len({d.host_id for d in run.devices.all()}) > 1:
                problems.append(f"run {run.pk} holds devices on several hosts")
        elif count:
            problems.append(f"run {run.pk} is {run.state} but holds {count} devices")
    held = Device.objects.filter(run__isnull=False).count()
    expected = sum(r.devices_wanted.device_count for r in Run.objects.filter(state=Run.State.RUNNING))
    if held != expected:
        problems.append(f"{held} devices held, running runs asked for {expected}")
    return problems
