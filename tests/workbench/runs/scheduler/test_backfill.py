"""Backfill below a waiting job of higher priority (workbench/runs/scheduler/placement.py): a
lower job starts on free devices no waiting higher job could ever use, and on no other, against
simulated hosts."""

from __future__ import annotations

import pytest

from tests.support.factories import make_dataset_row
from tests.workbench.runs.scheduler.test_scheduler import gpus, held, submit
from workbench.runs.devices import DeviceRequest
from workbench.runs.models import Run
from workbench.runs.scheduler import placement_preview, schedule
from workbench.workers.models import Device
from workbench.workers.simulation import simulate_hosts

CPU = DeviceRequest.cpu()


@pytest.fixture
def dataset(owner):
    return make_dataset_row(owner)


def states(*runs: Run) -> list[str]:
    for run in runs:
        run.refresh_from_db()
    return [run.state for run in runs]


def test_it_starts_cpu_runs_while_a_run_of_higher_priority_waits_for_two_gpus(owner, other_user, dataset):
    simulate_hosts(hosts=1, gpus_per_host=2)
    submit(owner, dataset, gpus(1), name="holder")
    schedule()  # one of the two GPUs held
    urgent = submit(other_user, dataset, gpus(2), priority=5, name="urgent")
    small = submit(owner, dataset, gpus(1), name="small")
    preview = placement_preview(user=owner, request=CPU)  # the new-run form says what the pass does
    on_cpu = submit(owner, dataset, CPU, name="on the cpu")
    second_cpu = submit(owner, dataset, CPU, name="second on the cpu")

    schedule()

    assert states(urgent, small, on_cpu, second_cpu) == ["waiting", "waiting", "running", "waiting"]
    # The free GPU is one urgent could use: kept for it. The CPU is one it never could.
    assert small.wait_reason == "behind 1 run of higher priority"
    assert [kind for kind in Device.objects.filter(run=on_cpu).values_list("kind", flat=True)] == ["cpu"]
    # Behind nothing that needs GPUs: it waits for its CPU, and says so.
    assert second_cpu.wait_reason == "the CPU of every online worker is in use"
    assert preview["start_now"] is True and preview["message"].startswith("Starts now on sim0@simulated: ")


def test_it_starts_a_lower_run_on_a_host_too_small_for_the_higher_one_and_no_other(owner, other_user, dataset):
    small_host, big_host = simulate_hosts(hosts=2, gpus_per_host=4)
    Device.objects.filter(host=small_host, kind="gpu", index__in=[1, 2, 3]).delete()  # 1 GPU
    submit(owner, dataset, DeviceRequest.on_host(big_host.hostname, [0, 1]), name="holder")
    schedule()  # two of the big host's four GPUs held
    urgent = submit(other_user, dataset, gpus(4), priority=5, name="urgent")
    first, second = submit(owner, dataset, gpus(1), name="first"), submit(owner, dataset, gpus(1), name="second")

    schedule()

    assert states(urgent, first, second) == ["waiting", "running", "waiting"]
    assert held(first) == [(small_host.hostname, 0)]  # urgent can never run on a 1-GPU host
    assert second.wait_reason == "behind 1 run of higher priority"  # GPUs 2, 3 of the big host: urgent's


def test_it_starts_a_lower_run_on_gpus_a_request_for_named_gpus_does_not_name(owner, other_user, dataset):
    (host,) = simulate_hosts(hosts=1, gpus_per_host=4)
    submit(owner, dataset, DeviceRequest.on_host(host.hostname, [0]), name="holder")
    schedule()
    urgent = submit(other_user, dataset, DeviceRequest.on_host(host.hostname, [0, 1]), priority=5, name="urgent")
    lower = [submit(owner, dataset, gpus(1), name=f"lower{i}") for i in range(3)]

    schedule()

    assert states(urgent, *lower) == ["waiting", "running", "running", "waiting"]
    assert sorted(index for run in lower for _, index in held(run)) == [2, 3]  # never GPU 1: urgent's


def test_it_keeps_the_cpu_for_a_waiting_cpu_run_of_higher_priority_and_lets_gpu_runs_start(owner, other_user,
                                                                                            dataset):  # fmt: skip
    simulate_hosts(hosts=1, gpus_per_host=1)
    submit(owner, dataset, CPU, name="holder")
    schedule()
    urgent = submit(other_user, dataset, CPU, priority=5, name="urgent")
    on_gpu, on_cpu = submit(owner, dataset, gpus(1), name="gpu"), submit(owner, dataset, CPU, name="cpu")

    schedule()

    assert states(urgent, on_gpu, on_cpu) == ["waiting", "running", "waiting"]
    assert on_cpu.wait_reason == "behind 1 run of higher priority"


def test_it_keeps_for_a_lower_waiting_run_what_it_could_use_from_runs_lower_still(owner, other_user, dataset):
    # urgent (5) needs both GPUs of the 2-GPU host; middle (3) is behind it, and the 1-GPU host
    # urgent can never use is middle's: the lowest run does not take it from middle.
    small_host, _ = simulate_hosts(hosts=2, gpus_per_host=2)
    Device.objects.filter(host=small_host, kind="gpu", index=1).delete()
    submit(owner, dataset, gpus(1), name="holder on the small host")
    submit(owner, dataset, gpus(1), name="holder on the big host")
    schedule()
    urgent = submit(other_user, dataset, gpus(2), priority=5, name="urgent")
    middle = submit(other_user, dataset, gpus(1), priority=3, name="middle")
    lowest = submit(owner, dataset, gpus(1), name="lowest")

    schedule()

    assert states(urgent, middle, lowest) == ["waiting", "waiting", "waiting"]
    assert lowest.wait_reason == "behind 2 runs of higher priority"
