"""System samples: the run's own GPUs only, the trainer's process tree, simulated GPUs labelled as such."""

import json
import subprocess
import sys
import time
import types

import pytest

from tests.support.waiting import wait_until
from workbench.runs.attempts.ingest import ingest_current_attempt
from workbench.runs.lifecycle import run_events_append
from workbench.runs.models import Run
from workbench.runs.system_sampler import CpuMeter, SystemSampler, sample_system
from workbench.workers.models import Device
from workbench.workers.simulation import simulate_hosts

# A stand-in trainer: a launcher that sleeps and two busy rank processes, as DDP on the CPU runs.
LAUNCHER = (
    "import subprocess, sys, time\n"
    "ranks = [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _ in range(2)]\n"
    "time.sleep(60)"
)


@pytest.fixture
def trainer():
    process = subprocess.Popen([sys.executable, "-c", LAUNCHER])
    yield process
    import psutil

    for child in psutil.Process(process.pid).children(recursive=True):
        child.kill()
    process.kill()
    process.wait()


def hold_gpus(run: Run, indices: list[int], *, gpus_per_host: int = 4) -> None:
    (host,) = simulate_hosts(hosts=1, gpus_per_host=gpus_per_host)
    Device.objects.filter(host=host, kind="gpu", index__in=indices).update(run=run)


def wait_for_children(pid: int, count: int) -> list[int]:
    import psutil

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        children = psutil.Process(pid).children(recursive=True)
        if len(children) >= count:
            return [child.pid for child in children]
        time.sleep(0.05)
    pytest.fail("the stand-in trainer did not start its child")


def test_it_measures_the_trainer_tree_and_labels_simulated_gpus_honestly(run, trainer):
    ranks = wait_for_children(trainer.pid, 2)
    hold_gpus(run, [1, 3])
    run.run_dir.mkdir(parents=True, exist_ok=True)
    (run.run_dir / "processes.json").write_text(json.dumps({"launcher": trainer.pid, "ranks": ranks}))
    run_events_append(run_id=run.pk, events=[{"type": "metrics", "step": 40, "epoch": 1.5, "images_seen": 320}])
    meter = CpuMeter()
    sample_system(run, pid=trainer.pid, meter=meter)
    time.sleep(0.5)
    event = sample_system(run, pid=trainer.pid, meter=meter)

    assert event["type"] == "system" and (event["step"], event["epoch"], event["images_seen"]) == (40, 1.5, 320)
    assert event["process_count"] == 3
    # Two busy processes on cores other work shares: measured as busy at all, at most two cores.
    assert 1 < event["process_cpu_percent"] <= 220
    assert event["process_rss_mb"] > 5 and 0 < event["host_memory_percent"] < 100
    assert [gpu["index"] for gpu in event["gpus"]] == [1, 3]  # the run's GPUs, not the host's four
    for gpu in event["gpus"]:
        assert gpu["simulated"] is True and "utilization_percent" not in gpu and "memory_used_mb" not in gpu
        assert gpu["cpu_percent"] > 0.5 and gpu["rss_mb"] > 5 and "simulated GPU" in gpu["measures"]


def test_it_reads_only_the_runs_gpus_through_nvml(run, monkeypatch):
    # This machine has no NVIDIA driver: a stand-in pynvml records which GPUs were asked for.
    hold_gpus(run, [2])
    Device.objects.filter(run=run).update(simulated=False, name="NVIDIA H200")
    asked = []
    fake = types.SimpleNamespace(
        NVMLError=RuntimeError,
        NVML_TEMPERATURE_GPU=0,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda index: asked.append(index) or index,
        nvmlDeviceGetMemoryInfo=lambda handle: types.SimpleNamespace(used=40 * 2**30, total=141 * 2**30),
        nvmlDeviceGetUtilizationRates=lambda handle: types.SimpleNamespace(gpu=97, memory=60),
        nvmlDeviceGetTemperature=lambda handle, sensor: 61,
        nvmlDeviceGetPowerUsage=lambda handle: 612_000,
        nvmlDeviceGetComputeRunningProcesses=lambda handle: [types.SimpleNamespace(pid=4242, usedGpuMemory=2**30)],
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr("workbench.runs.system_sampler.process_tree", lambda pid: [types.SimpleNamespace(pid=4242)])
    monkeypatch.setattr("trainer.system_samples.tree_usage", lambda tree, meter, scope="": (0.0, 0.0))

    (gpu,) = sample_system(run, pid=4242)["gpus"]
    assert asked == [2]
    assert gpu == {
        "index": 2, "name": "NVIDIA H200", "simulated": False, "utilization_percent": 97.0,
        "memory_utilization_percent": 60.0, "memory_used_mb": 40 * 1024, "memory_total_mb": 141 * 1024,
        "temperature_c": 61, "power_watts": 612.0, "process_memory_mb": 1024,
    }  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_it_stores_a_sample_every_interval_until_stopped(run, trainer):
    with SystemSampler(run, interval=0.2, pid=trainer.pid) as sampler:
        # Counted, not timed: a busy machine makes the samples late, never fewer than awaited.
        wait_until(lambda: sampler.samples >= 3, what="three system samples", timeout=60, interval=0.05)
    stored = list(run.events.filter(kind="system").order_by("seq"))
    assert len(stored) == sampler.samples >= 3
    time.sleep(0.5)  # a sampler that kept going would store more within a couple of intervals
    assert run.events.filter(kind="system").count() == len(stored)  # stopped means stopped
    assert all(event.data["process_count"] == 3 for event in stored[1:])
    assert not sampler._thread.is_alive()


@pytest.mark.django_db(transaction=True)
def test_it_keeps_sampling_when_the_trainer_is_gone(run):
    with SystemSampler(run, interval=0.1, pid=999_999_999) as sampler:
        time.sleep(0.45)
    assert sampler.samples >= 2
    assert run.events.filter(kind="system", data__process_count=0).count() == sampler.samples


def test_it_places_samples_before_the_first_metric_at_the_runs_start(run):
    event = sample_system(run, pid=None, meter=CpuMeter())
    assert (event["step"], event["epoch"], event["images_seen"]) == (0, 0.0, 0)


@pytest.mark.django_db(transaction=True)
def test_it_takes_the_first_sample_soon_not_one_interval_in(run, trainer):
    # A run shorter than the interval (5 s by default) would otherwise have no sample at all.
    started = time.monotonic()
    with SystemSampler(run, interval=30, pid=trainer.pid) as sampler:
        wait_until(lambda: sampler.samples >= 1, what="the first system sample", timeout=20, interval=0.05)
    assert time.monotonic() - started < 20
    (event,) = run.events.filter(kind="system")
    assert (event.step, event.epoch) == (0, 0.0)


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
