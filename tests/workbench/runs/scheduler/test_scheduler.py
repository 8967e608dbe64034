"""The queue and allocation against a simulated inventory (database rows, no worker)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from workbench.runs.devices import DeviceRequest
from workbench.runs.lifecycle import run_finish
from workbench.runs.models import Run
from workbench.runs.scheduler import placement_preview, queue_order, schedule
from workbench.runs.scheduler.run_jobs import run_job
from workbench.runs.services import run_abort, run_create
from workbench.workers.models import Device, WorkerHost
from workbench.workers.simulation import simulate_hosts


@pytest.fixture
def dataset(owner):
    return make_dataset_row(owner)


def submit(owner, dataset, request, *, priority=0, name="r") -> Run:
    return run_create(
        owner=owner, dataset=dataset, name=name, network="lenet", config={}, device_request=request, priority=priority
    )


def gpus(count):
    return DeviceRequest.gpus(count)


def held(run):
    return sorted((d.host.hostname, d.index) for d in Device.objects.filter(run=run).select_related("host"))


def test_it_allocates_all_requested_gpus_on_one_host(owner, dataset):
    simulate_hosts(hosts=2, gpus_per_host=4)
    run = submit(owner, dataset, gpus(3))
    assert schedule()["started"] == 1
    run.refresh_from_db()
    assert run.state == Run.State.RUNNING and run.attempt == 1
    assert len({host for host, _ in held(run)}) == 1 and len(held(run)) == 3


def test_it_never_gives_a_gpu_to_two_runs_and_makes_the_rest_wait(owner, dataset):
    simulate_hosts(hosts=1, gpus_per_host=4)
    first, second, third = (submit(owner, dataset, gpus(2), name=f"r{i}") for i in range(3))
    schedule()
    for run in (first, second, third):
        run.refresh_from_db()
    assert [first.state, second.state, third.state] == ["running", "running", "waiting"]
    assert set(held(first)).isdisjoint(held(second))
    assert third.wait_reason == "needs 2 GPUs on one host, 0 free"


def test_it_starts_a_waiting_run_when_gpus_free_up(owner, dataset):
    simulate_hosts(hosts=1, gpus_per_host=2)
    first, second = submit(owner, dataset, gpus(2)), submit(owner, dataset, gpus(2))
    schedule()
    run_abort(run=first)  # a pending abort would finish at once; this one is running
    first.refresh_from_db()
    assert first.stop_request == "abort"
    from workbench.runs.lifecycle import run_finish

    run_finish(run=first, to_state=Run.State.ABORTED, reason="test")
    assert not Device.objects.filter(run=first).exists()
    schedule()
    second.refresh_from_db()
    assert second.state == Run.State.RUNNING and len(held(second)) == 2


def test_it_uses_best_fit_to_keep_big_hosts_whole(owner, dataset):
    small, big = simulate_hosts(hosts=2, gpus_per_host=4)
    Device.objects.filter(host=small, index__in=[0, 1, 2]).delete()  # small host: 1 GPU
    run = submit(owner, dataset, gpus(1))
    schedule()
    assert held(run) == [(small.hostname, 3)]


def test_it_explains_why_runs_wait(owner, dataset):
    too_big = submit(owner, dataset, gpus(8))
    schedule()
    too_big.refresh_from_db()
    assert too_big.wait_reason == "no worker online"
    simulate_hosts(hosts=2, gpus_per_host=4)
    schedule()
    too_big.refresh_from_db()
    assert too_big.state == Run.State.WAITING
    assert too_big.wait_reason == "needs 8 GPUs on one host; the largest online host has 4"


def test_it_waits_for_the_dataset_and_fails_when_it_failed(owner, dataset):
    simulate_hosts(hosts=1, gpus_per_host=1)
    Dataset.objects.filter(pk=dataset.pk).update(status=Dataset.Status.BUILDING)
    run = submit(owner, dataset, gpus(1))
    schedule()
    run.refresh_from_db()
    assert (run.state, run.wait_reason) == ("queued", "dataset still building")
    Dataset.objects.filter(pk=dataset.pk).update(status=Dataset.Status.FAILED, error="no images found")
    schedule()
    run.refresh_from_db()
    assert run.state == Run.State.FAILED
    assert "dataset 'bars' failed: no images found" in run.error


def test_it_places_specific_gpus_or_says_who_holds_them(owner, dataset):
    (host,) = simulate_hosts(hosts=1, gpus_per_host=4)
    first = submit(owner, dataset, {"kind": "specific", "host": host.hostname, "indices": [1, 3]})
    second = submit(owner, dataset, {"kind": "specific", "host": host.hostname, "indices": [3]})
    schedule()
    first.refresh_from_db()
    second.refresh_from_db()
    assert held(first) == [(host.hostname, 1), (host.hostname, 3)]
    # Stored without the holder's name; rendered for whoever reads it.
    assert second.wait_reason == f"GPU 3 on {host.hostname} is in use by another run"
    assert second.wait_reason_for(owner) == f"GPU 3 on {host.hostname} is in use by run #{first.pk} (r)"


def test_it_stores_a_wait_reason_that_names_no_holder(owner, other_user, staff_user, dataset):
    (host,) = simulate_hosts(hosts=1, gpus_per_host=1)
    secret = submit(owner, dataset, {"kind": "specific", "host": host.hostname, "indices": [0]}, name="alice-secret")
    waiting = submit(other_user, dataset, {"kind": "specific", "host": host.hostname, "indices": [0]}, name="bobs")
    schedule()
    waiting.refresh_from_db()
    assert waiting.state == Run.State.WAITING and waiting.wait_holder_id == secret.pk
    stored = [waiting.wait_reason, *waiting.transitions.values_list("reason", flat=True)]
    stored += [str(event.data) for event in waiting.events.all()]
    assert not any("alice-secret" in text or f"#{secret.pk}" in text for text in stored), stored
    hidden = f"GPU 0 on {host.hostname} is in use by another user's run"
    assert waiting.wait_reason_for(other_user) == hidden and waiting.wait_reason_for(None) == hidden
    shown = f"GPU 0 on {host.hostname} is in use by run #{secret.pk} (alice-secret)"
    assert waiting.wait_reason_for(owner) == shown and waiting.wait_reason_for(staff_user) == shown
    run_finish(run=secret, to_state=Run.State.DONE)
    schedule()
    waiting.refresh_from_db()
    assert waiting.state == Run.State.RUNNING and waiting.wait_reason == "" and waiting.wait_holder_id is None


def test_it_interleaves_users_within_a_priority(owner, other_user, dataset):
    alice_runs = [submit(owner, dataset, gpus(1), name=f"a{i}") for i in range(3)]
    bob_run = submit(other_user, dataset, gpus(1), name="b0")
    order = [job.row.name for job in queue_order([run_job(run) for run in Run.objects.all()])]
    assert order == ["a0", "b0", "a1", "a2"]
    assert alice_runs[0].queued_at < bob_run.queued_at


def test_it_lets_higher_priority_go_first_and_blocks_lower_ones(owner, other_user, dataset):
    simulate_hosts(hosts=1, gpus_per_host=2)
    submit(owner, dataset, gpus(2), name="big")
    schedule()  # big holds both GPUs
    urgent = submit(other_user, dataset, gpus(2), priority=5, name="urgent")
    small = submit(owner, dataset, gpus(1), name="small")
    schedule()
    urgent.refresh_from_db()
    small.refresh_from_db()
    assert urgent.state == small.state == Run.State.WAITING
    assert small.wait_reason == "behind 1 run of higher priority"
    assert [job.row.name for job in queue_order([run_job(small), run_job(urgent)])] == ["urgent", "small"]


def test_it_estimates_the_start_from_the_holders_time_left(owner, dataset):
    simulate_hosts(hosts=1, gpus_per_host=2)
    holder = submit(owner, dataset, gpus(2))
    schedule()
    Run.objects.filter(pk=holder.pk).update(eta_seconds=600)
    waiting = submit(owner, dataset, gpus(1))
    schedule()
    waiting.refresh_from_db()
    expected = timezone.now() + timedelta(seconds=600)
    assert abs((waiting.estimated_start - expected).total_seconds()) < 5


def test_it_reclaims_gpus_of_a_silent_host_and_interrupts_its_runs(owner, dataset, settings):
    (host,) = simulate_hosts(hosts=1, gpus_per_host=2)
    run = submit(owner, dataset, gpus(2))
    schedule()
    WorkerHost.objects.filter(pk=host.pk).update(
        last_seen=timezone.now() - timedelta(seconds=settings.WORKER_TIMEOUT_SECONDS + 1)
    )
    assert schedule()["reclaimed"] == 1
    run.refresh_from_db()
    assert run.state == Run.State.INTERRUPTED
    assert "stopped sending heartbeats" in run.transitions.last().reason
    assert not Device.objects.filter(run=run).exists()


def test_it_interrupts_runs_of_a_restarted_worker_and_resumes_them(owner, dataset):
    (host,) = simulate_hosts(hosts=1, gpus_per_host=1)
    run = submit(owner, dataset, gpus(1))
    schedule()
    simulate_hosts(hosts=1, gpus_per_host=1)  # same host name, new boot id
    schedule()  # reclaims, then starts the interrupted run again
    run.refresh_from_db()
    states = [t.to_state for t in run.transitions.all()]
    assert states == ["queued", "running", "interrupted", "running"]
    assert run.attempt == 2


def test_it_fails_a_run_interrupted_too_often(owner, dataset, settings):
    settings.RUN_MAX_ATTEMPTS = 2
    simulate_hosts(hosts=1, gpus_per_host=1)
    run = submit(owner, dataset, gpus(1))
    for _ in range(3):
        schedule()
        simulate_hosts(hosts=1, gpus_per_host=1)
    schedule()
    run.refresh_from_db()
    assert run.state == Run.State.FAILED
    assert run.error.startswith("interrupted 2 times; the last time worker sim0@simulated restarted")


def test_it_aborts_a_queued_run_at_once(owner, dataset):
    run = submit(owner, dataset, gpus(1))
    run_abort(run=run)
    run.refresh_from_db()
    assert run.state == Run.State.ABORTED and run.finished_at is not None


@pytest.mark.parametrize("blocker_priority", [0, 5])
def test_it_previews_a_backfill_as_the_scheduler_then_does_it(owner, other_user, dataset, blocker_priority):
    """The new-run form's preview is the scheduler's own pass, dry: a small run starts around a
    big one of its priority that waits (backfill), and waits behind one of a higher priority."""
    simulate_hosts(hosts=1, gpus_per_host=4)
    submit(other_user, dataset, gpus(2), name="holder")
    schedule()  # the holder takes two of the four GPUs
    big = submit(other_user, dataset, gpus(4), priority=blocker_priority, name="big")
    schedule()
    big.refresh_from_db()
    assert big.state == Run.State.WAITING
    preview = placement_preview(user=owner, request=gpus(1))
    small = submit(owner, dataset, gpus(1), name="small")
    schedule()
    small.refresh_from_db()
    assert preview["start_now"] is (small.state == Run.State.RUNNING) is (blocker_priority == 0)
    if preview["start_now"]:
        where = ", ".join(f"GPU {index}" for _, index in held(small))
        assert preview["message"] == f"Starts now on {small.host.hostname}: {where}."
    else:
        assert preview["message"] == "Waits in the queue at position 2 of 2: behind runs of higher priority."
        assert small.wait_reason == "behind 1 run of higher priority"


def test_it_resends_an_unclaimed_launch_once_per_grace_period(owner, dataset):
    # Every worker's heartbeat runs a pass; a launch waiting for a free worker thread must not be
    # copied into the broker on each of them.
    from workbench.runs.scheduler import relaunch_unclaimed

    simulate_hosts(hosts=1, gpus_per_host=1)
    run = submit(owner, dataset, gpus(1))
    assert schedule()["started"] == 1
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
    assert relaunch_unclaimed() == 1
    assert [relaunch_unclaimed(), relaunch_unclaimed()] == [0, 0]
