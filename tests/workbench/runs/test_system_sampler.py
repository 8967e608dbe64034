"""System samples of a local run: the sampler beside its trainer (trainer/system_samples.py, as on
every Slurm node) measures the run's own GPUs by the inventory's numbers and names and the
trainer's process tree; the worker's watch stores them once, at the run's latest step."""

import json
import os
import subprocess
import sys

from tests.conftest import REPO_ROOT
from workbench.runs.attempts.files import AttemptFiles
from workbench.runs.attempts.ingest import IngestLedger, ingest_current_attempt, ingest_earlier_attempts
from workbench.runs.executors.local import Tails, sampler_argv
from workbench.runs.lifecycle import run_events_append
from workbench.runs.models import Run
from workbench.workers.models import Device
from workbench.workers.simulation import simulate_hosts

# A stand-in trainer: two busy rank processes listed in processes.json, as DDP on the CPU runs,
# for a second and a half.
BUSY = "import time\\nend = time.time() + 1.5\\nwhile time.time() < end: pass"
TRAINER = (
    "import json, os, subprocess, sys\n"
    f"ranks = [subprocess.Popen([sys.executable, '-c', '{BUSY}']) for _ in range(2)]\n"
    "open('processes.json', 'w').write(json.dumps({'launcher': os.getpid(), 'ranks': [r.pid for r in ranks]}))\n"
    "[r.wait() for r in ranks]\n"
)


def hold_gpus(run: Run, indices: list[int], *, gpus_per_host: int = 4) -> list[Device]:
    (host,) = simulate_hosts(hosts=1, gpus_per_host=gpus_per_host)
    Device.objects.filter(host=host, kind="gpu", index__in=indices).update(run=run)
    return list(run.devices.order_by("kind", "index"))


def sampled_attempt(run: Run, settings, gpus: list[int]) -> AttemptFiles:
    """The run's attempt 1 trained by the stand-in trainer through the local executor's sampler."""
    settings.SYSTEM_SAMPLE_SECONDS = 0.2
    Run.objects.filter(pk=run.pk).update(attempt=1)
    run.refresh_from_db()
    run.run_dir.mkdir(parents=True, exist_ok=True)
    files = AttemptFiles(run.run_dir, 1)
    argv = sampler_argv(hold_gpus(run, gpus), files) + ["--", sys.executable, "-c", TRAINER]
    subprocess.run(argv, cwd=run.run_dir, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, check=True, timeout=60)
    return files


def test_it_samples_the_runs_own_gpus_by_the_inventorys_numbers_and_names(run, settings):
    files = sampled_attempt(run, settings, [1, 3])
    run_events_append(run_id=run.pk, events=[{"type": "metrics", "step": 40, "epoch": 1.5, "images_seen": 320}])

    tails = Tails(run, files, IngestLedger(run, 1))
    tails.store()
    rows = run.events.filter(kind="system").order_by("seq")
    stored = [row.data | {"step": row.step, "epoch": row.epoch} for row in rows]
    assert len(stored) >= 3  # the first soon (not one interval in), then every 0.2 s while it lived
    assert all((event["step"], event["epoch"], event["images_seen"]) == (40, 1.5, 320) for event in stored)
    busiest = max(stored, key=lambda event: event["process_cpu_percent"])
    assert busiest["process_count"] == 3  # the trainer and its two ranks, not the sampler
    assert 1 < busiest["process_cpu_percent"] <= 220  # two busy processes on cores other work shares
    assert busiest["process_rss_mb"] > 5 and 0 < busiest["host_memory_percent"] < 100
    # The run's GPUs, not the host's four, by the numbers and names the pages use.
    assert [(gpu["index"], gpu["name"]) for gpu in busiest["gpus"]] == [(1, "Simulated GPU 1"), (3, "Simulated GPU 3")]
    for gpu in busiest["gpus"]:
        assert gpu["simulated"] is True and "utilization_percent" not in gpu and "memory_used_mb" not in gpu
        assert gpu["cpu_percent"] > 0.5 and gpu["rss_mb"] > 5 and "simulated GPU" in gpu["measures"]
    # Each line once: the next look, or the next attempt catching up, stores nothing again.
    tails.store()
    ingest_earlier_attempts(run, 2)
    assert run.events.filter(kind="system").count() == len(stored)


def test_it_places_samples_before_the_first_metric_at_the_runs_start(run, settings):
    files = sampled_attempt(run, settings, [0])
    Tails(run, files, IngestLedger(run, 1)).store()
    event = run.events.filter(kind="system").first()
    assert (event.step, event.epoch, event.data["images_seen"]) == (0, 0.0, 0)


def test_it_stores_what_a_killed_workers_sampler_left_when_the_next_attempt_starts(run, settings):
    files = sampled_attempt(run, settings, [0])
    IngestLedger(run, 1, events=files.system).start()  # the watch began, stored nothing, then died
    ingest_earlier_attempts(run, 2)
    lines = files.system.read_text().splitlines()
    assert run.events.filter(kind="system").count() == len(lines) >= 1


def test_it_samples_a_cpu_run_with_no_gpus(run, settings):
    files = sampled_attempt(run, settings, [])
    samples = [json.loads(line) for line in files.system.read_text().splitlines()]
    assert samples and all(sample["gpus"] == [] and sample["process_count"] >= 1 for sample in samples)


def test_it_stores_the_samples_each_slurm_node_wrote_at_the_runs_latest_step(run):
    # What the samplers beside a two-node job's trainers leave (trainer/system_samples.py): their
    # own files, no step of their own.
    Run.objects.filter(pk=run.pk).update(attempt=1)
    run.refresh_from_db()
    run.run_dir.mkdir(parents=True, exist_ok=True)
    metrics = {"type": "metrics", "time": 1.0, "step": 7, "epoch": 0.5, "images_seen": 56, "loss": 1.0}
    (run.run_dir / "events-1.jsonl").write_text(json.dumps(metrics) + "\n")
    first = {"type": "system", "time": 2.0, "node": "n1", "node_rank": 0, "host_cpu_percent": 50.0, "gpus": []}
    second = {"type": "system", "time": 2.0, "node": "n2", "node_rank": 1, "node1_host_cpu_percent": 40.0, "gpus": []}
    (run.run_dir / "system-1.jsonl").write_text(json.dumps(first) + "\n")
    (run.run_dir / "system-1.node1.jsonl").write_text(json.dumps(second) + "\nnot a sample\n")

    assert ingest_current_attempt(run) == 3
    samples = run.events.filter(kind="system").order_by("seq")
    assert [(e.data["node"], e.step, e.epoch, e.data["images_seen"]) for e in samples] == [
        ("n1", 7, 0.5, 56),
        ("n2", 7, 0.5, 56),
    ]
    assert ingest_current_attempt(run) == 0  # each file's ledger: nothing is stored twice
