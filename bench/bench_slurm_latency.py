"""Submission to first stored metric: a run through the Slurm executor vs the local executor.

Both through the real thing, side by side in one process: a two-node Slurm cluster on this
machine (tests/support/slurm_cluster.py), one Celery worker on Redis that both follows Slurm and
trains local runs, the same tiny LeNet run on the CPU. Time = from `run_submit` returning to the
first `metrics` event in the database (what the run page shows first). The local executor is the
baseline: Slurm adds sbatch, its scheduler's cycle, the job's start and srun.

    .venv/bin/python bench/bench_slurm_latency.py [--runs 3] [--redis redis://127.0.0.1:6379/13]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONFIG = {"epochs": 3, "batch_size": 8, "metrics_interval": 1, "data": {"num_workers": 0}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs per executor")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-slurm-"))
    from tests.support.slurm_cluster import PARTITION, SlurmCluster

    cluster = SlurmCluster(folder / "slurm").start()
    env = {
        "WORKBENCH_DATA_DIR": str(folder / "data"),
        "REDIS_URL": args.redis,
        "WORKBENCH_SLURM": "1",
        "WORKBENCH_SLURM_PARTITION": PARTITION,
        "WORKBENCH_SLURM_POLL_SECONDS": "1",
        "WORKBENCH_HEARTBEAT_SECONDS": "1",
        "WORKBENCH_SIMULATED_GPUS": "1",
        "PYTHONPATH": str(ROOT),
        **cluster.env,
    }
    os.environ.update(env)
    os.environ["DJANGO_SETTINGS_MODULE"] = "workbench.settings"
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
    subprocess.run(["redis-cli", "-u", args.redis, "flushdb"], check=False, capture_output=True)
    import django

    django.setup()
    from workbench.supervisor import celery_worker_argv

    argv = celery_worker_argv(nodename="bench@localhost", concurrency=4, extra=("--without-mingle", "--without-gossip"))
    log = (folder / "worker.log").open("ab")
    worker = subprocess.Popen(argv, cwd=ROOT, env=os.environ.copy(), stdout=log, stderr=subprocess.STDOUT)
    try:
        results = measure(args.runs)
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        cluster.stop()
    local, slurm = statistics.median(results["local"]), statistics.median(results["slurm"])
    print(f"| executor | submission -> first metric, median of {args.runs} (s) | each (s) |")
    print("| --- | --- | --- |")
    for name, value in (("local (baseline)", local), ("slurm", slurm)):
        each = ", ".join(f"{v:.1f}" for v in results[name.split()[0]])
        print(f"| {name} | {value:.1f} | {each} |")
    print(f"\nslurm / local: {slurm / local:.2f}x")
    return 0


def measure(runs: int) -> dict[str, list[float]]:
    from django.contrib.auth import get_user_model

    from datasets.models import Dataset
    from tests.support.trainer_data import make_dataset_folder
    from workbench.runs.models import Run, RunEvent
    from workbench.runs.services import run_submit

    owner = get_user_model().objects.create_user("bench", password="bench-password-123")
    dataset = Dataset.objects.create(
        owner=owner, name="bars", status=Dataset.Status.READY, image_width=8, image_height=8
    )
    make_dataset_folder(dataset.path)
    results: dict[str, list[float]] = {"local": [], "slurm": []}
    for index in range(runs):
        for executor, gpus in (("local", "cpu"), ("slurm", "1")):
            started = time.monotonic()
            run = run_submit(
                owner=owner, dataset=dataset, name=f"{executor}-{index}", network="lenet", config=CONFIG,
                gpus=gpus, executor=executor,
            )  # fmt: skip
            deadline = started + 300
            while not RunEvent.objects.filter(run=run, kind="metrics").exists():
                if time.monotonic() > deadline:
                    raise SystemExit(
                        f"{executor} run {run.pk} stored no metric within 300 s ({Run.objects.get(pk=run.pk).state})"
                    )
                time.sleep(0.05)
            results[executor].append(time.monotonic() - started)
            while Run.objects.get(pk=run.pk).state not in Run.FINISHED_STATES:
                time.sleep(0.2)  # one run at a time: each measures an idle machine
    return results


if __name__ == "__main__":
    sys.exit(main())
