"""Scheduling latency and allocation conflicts: 200 runs on 16 simulated GPUs over 4 hosts.

Ours: 4 processes submit at once (each submission followed by a scheduling pass, as the web layer
does), while a finisher process plays the trainers (ends each run after ~0.3 s) and schedules.
Baseline: the same workload from 1 submitting process, so nothing contends. Latency is measured
from the moment a run's GPUs were all free and the run was submitted, to the moment it got them.
Conflicts: any GPU held by two runs at overlapping times (read back from the timeline), plus any
inconsistency in the final allocation state; both must be 0.

    .venv/bin/python bench/bench_scheduler.py [--runs 200] [--postgres URL]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

STARTED = re.compile(r"^started on (?P<host>\S+): (?P<devices>.+)$")


def run_workload(*, runs: int, submitters: int, database_url: str | None, seed: int) -> dict:
    env = {"DJANGO_SETTINGS_MODULE": "workbench.settings", "WORKBENCH_DATA_DIR": tempfile.mkdtemp(prefix="bench-")}
    if database_url:
        env["DATABASE_URL"] = database_url
    os.environ.update(env)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from datasets.models import Dataset
    from tests.support import loadgen
    from workbench.runs.models import Run, RunTransition
    from workbench.workers.simulation import simulate_hosts

    call_command("migrate", verbosity=0)
    Run.objects.all().delete()
    users = [get_user_model().objects.create_user(f"user{i}-{uuid.uuid4().hex[:6]}") for i in range(8)]
    simulate_hosts(hosts=4, gpus_per_host=4)
    dataset = Dataset.objects.create(owner=users[0], name="bench", status=Dataset.Status.READY)
    rng = random.Random(seed)
    requests = [{"kind": "count", "count": rng.choice([1, 1, 1, 2, 2, 4])} for _ in range(runs)]
    chunks = [requests[i::submitters] for i in range(submitters)]
    context = multiprocessing.get_context("spawn")
    started = time.time()
    with context.Pool(submitters + 1) as pool:
        start_at = time.time() + 3
        jobs = [
            pool.apply_async(loadgen.submitter, (env, [u.pk for u in users], dataset.pk, chunk, start_at))
            for chunk in chunks
        ]
        finisher = pool.apply_async(loadgen.finisher, (env, runs, 0.3, start_at + 600, seed))
        for job in jobs:
            job.get(timeout=900)
        finisher.get(timeout=900)
    elapsed = time.time() - started

    intervals: dict[str, list[tuple[float, float, int]]] = defaultdict(list)  # device -> (start, end, run)
    latencies = []
    transitions = defaultdict(list)
    for transition in RunTransition.objects.order_by("at", "pk"):
        transitions[transition.run_id].append(transition)
    starts = []
    for run_id, timeline in transitions.items():
        submitted = timeline[0].at.timestamp()
        for index, transition in enumerate(timeline):
            match = STARTED.match(transition.reason) if transition.to_state == "running" else None
            if not match:
                continue
            end = next((t.at.timestamp() for t in timeline[index + 1 :] if t.to_state != "running"), float("inf"))
            devices = [f"{match['host']}:{label.strip()}" for label in match["devices"].split(",")]
            for device in devices:
                intervals[device].append((transition.at.timestamp(), end, run_id))
            starts.append((run_id, submitted, transition.at.timestamp(), devices))
    overlaps = 0
    for spans in intervals.values():
        spans.sort()
        overlaps += sum(1 for a, b in zip(spans, spans[1:], strict=False) if b[0] < a[1])
    for run_id, submitted, start, devices in starts:
        freed = [
            max((end for s, end, other in intervals[d] if end <= start and other != run_id), default=0) for d in devices
        ]
        latencies.append(start - max([submitted, *freed]))
    latencies.sort()
    problems = loadgen.check_allocations()
    return {
        "runs": runs,
        "done": Run.objects.filter(state=Run.State.DONE).count(),
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * latencies[int(0.95 * (len(latencies) - 1))],
        "conflicts": overlaps + len(problems),
        "elapsed_s": elapsed,
    }


def _child(queue, kwargs) -> None:
    queue.put(run_workload(**kwargs))


def measure(runs: int, submitters: int, postgres_admin_url: str | None) -> dict:
    """One measurement in a fresh interpreter, on a fresh database."""
    database_url = None
    if postgres_admin_url:
        import psycopg

        name = f"bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(postgres_admin_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        database_url = postgres_admin_url.rsplit("/", 1)[0] + f"/{name}"
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    kwargs = {"runs": runs, "submitters": submitters, "database_url": database_url, "seed": 1}
    process = context.Process(target=_child, args=(queue, kwargs))
    process.start()
    try:
        return queue.get(timeout=1800)
    finally:
        process.join()
        if database_url:
            with psycopg.connect(postgres_admin_url, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--submitters", type=int, default=4)
    parser.add_argument(
        "--postgres", metavar="ADMIN_URL", help="e.g. postgresql://postgres@127.0.0.1/postgres (default: SQLite)"
    )
    args = parser.parse_args()
    ours = measure(args.runs, args.submitters, args.postgres)
    baseline = measure(args.runs, 1, args.postgres)
    database = "PostgreSQL" if args.postgres else "SQLite (WAL)"
    print(f"scheduling {args.runs} runs on 16 simulated GPUs / 4 hosts, {database}")
    print(f"{'':34} {'p50 ms':>8} {'p95 ms':>8} {'conflicts':>9} {'done':>5} {'wall s':>7}")
    rows = ((f"ours: {args.submitters} concurrent submitters", ours), ("baseline: 1 submitter", baseline))
    for name, row in rows:
        print(
            f"{name:34} {row['p50_ms']:8.1f} {row['p95_ms']:8.1f} "
            f"{row['conflicts']:9d} {row['done']:5d} {row['elapsed_s']:7.1f}"
        )
    p50_ratio = ours["p50_ms"] / baseline["p50_ms"]
    p95_ratio = ours["p95_ms"] / baseline["p95_ms"]
    print(f"ratio ours/baseline: p50 {p50_ratio:.2f}x, p95 {p95_ratio:.2f}x")
    if ours["conflicts"] or baseline["conflicts"]:
        sys.exit("allocation conflicts found")


if __name__ == "__main__":
    main()
