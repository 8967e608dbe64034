"""`manage.py benchmark --wait` end to end on the suite's real worker (it queues, waits printing
its progress, then prints the table; a classifier's and a segmentation network's), and
cancelling a running benchmark: its trainer is stopped, the cells measured so far are kept and
its GPUs are given back."""

from __future__ import annotations

import csv
import io

import psutil
import pytest
from django.core.management import call_command

from tests.support.waiting import wait_for_state, wait_until
from trainer import protocol
from workbench.benchmarks.models import Benchmark
from workbench.workers.models import Device

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SMALL = ["--network", "lenet", "--image-size", "28", "--gpus", "1", "--steps", "2", "--warmup-steps", "1"]


def test_it_waits_for_a_benchmark_from_the_command_line_and_prints_its_table(celery_worker, owner):
    out, err = io.StringIO(), io.StringIO()
    call_command("benchmark", "--owner", owner.username, *SMALL, "--batch-sizes", "8,16", "--wait",
                 "--format", "csv", stdout=out, stderr=err)  # fmt: skip
    benchmark = Benchmark.objects.get()
    assert benchmark.state == Benchmark.State.DONE, benchmark.reason
    assert f"benchmark {benchmark.pk}: done 100%" in err.getvalue()
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert [(r["gpus"], r["batch_size"], r["status"]) for r in rows] == [("1", "8", "ok"), ("1", "16", "ok")]
    assert all(float(r["images_per_sec"]) > 0 for r in rows)

    # A segmentation network, as a classifier (issue 22): measured with its task's step on random masks.
    table = io.StringIO()
    call_command("benchmark", "--owner", owner.username, "--network", "lraspp_mobilenet_v3_large", "--image-size",
                 "32", "--steps", "1", "--warmup-steps", "0", "--batch-sizes", "4", "--wait", stdout=table,
                 stderr=io.StringIO())  # fmt: skip
    assert Benchmark.objects.latest("pk").state == Benchmark.State.DONE
    assert "| batch / GPU | 1 GPU |" in table.getvalue() and "| 4 | " in table.getvalue()


def test_it_cancels_a_running_benchmark_keeping_the_cells_measured(celery_worker, owner, owner_client):
    batches = "8,16,32,64,128,256"
    out = io.StringIO()
    call_command("benchmark", "--owner", owner.username, *SMALL, "--steps", "150", "--batch-sizes", batches,
                 stdout=out)  # fmt: skip
    benchmark = Benchmark.objects.get()
    wait_for_state(benchmark, Benchmark.State.RUNNING, timeout=60)
    wait_until(lambda: benchmark.cells.exists(), what="the first cell", timeout=120)
    answer = owner_client.post(f"/api/benchmarks/{benchmark.pk}/cancel/")
    assert answer.status_code == 202
    wait_for_state(benchmark, Benchmark.State.CANCELLED, Benchmark.State.DONE, Benchmark.State.FAILED, timeout=60)
    assert benchmark.state == Benchmark.State.CANCELLED, benchmark.reason
    kept = benchmark.cells.count()
    assert 1 <= kept < len(batches.split(","))
    assert benchmark.reason == f"cancelled by the user; {kept} cells measured are kept"
    assert not Device.objects.filter(reserved_by=benchmark.reservation).exists()
    # Ended: nothing more to cancel.
    assert owner_client.post(f"/api/benchmarks/{benchmark.pk}/cancel/").status_code == 409


def test_it_stops_the_trainer_of_a_benchmark_deleted_while_it_runs(celery_worker, owner):
    call_command("benchmark", "--owner", owner.username, *SMALL, "--steps", "10000", "--batch-sizes",
                 "8,16,32,64,128,256", stdout=io.StringIO())  # fmt: skip
    benchmark = Benchmark.objects.get()
    config = str(benchmark.run_dir / protocol.launch_name(1))

    def trainers() -> list[psutil.Process]:
        return [p for p in psutil.process_iter(["cmdline"]) if config in (p.info["cmdline"] or [])]

    wait_until(trainers, what="its trainer to start", timeout=120)
    Benchmark.objects.filter(pk=benchmark.pk).delete()  # as the database is emptied under it
    wait_until(lambda: not trainers(), what="the trainer of the deleted benchmark to stop", timeout=60)
    reserved = Device.objects.filter(reserved_by=benchmark.reservation)
    wait_until(lambda: not reserved.exists(), what="its GPU to be given back", timeout=30)


def test_it_stops_a_benchmark_at_its_time_budget_keeping_the_cells_measured(celery_worker, owner):
    # Every device held while the budget is cut to 3 s (the form and API take whole minutes).
    Device.objects.update(reserved_by="test: hold")
    call_command("benchmark", "--owner", owner.username, *SMALL, "--steps", "10000", "--batch-sizes", "8,16,32",
                 "--time-budget", "1", stdout=io.StringIO())  # fmt: skip
    benchmark = Benchmark.objects.get()
    assert benchmark.request["time_budget_minutes"] == 1
    Benchmark.objects.filter(pk=benchmark.pk).update(request={**benchmark.request, "time_budget_minutes": 0.05})
    Device.objects.update(reserved_by="")
    wait_for_state(benchmark, Benchmark.State.FAILED, Benchmark.State.DONE, Benchmark.State.CANCELLED, timeout=120)
    assert benchmark.state == Benchmark.State.FAILED
    assert (
        benchmark.reason == f"stopped at its time budget of 3 s; the {benchmark.cells.count()} cells measured are kept"
    )
    assert not Device.objects.filter(reserved_by=benchmark.reservation).exists()
