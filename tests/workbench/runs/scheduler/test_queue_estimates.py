"""Queue start estimates: the queue played forward with the scheduler's own order and placement,
over the holders' time left and the known lengths of the waiting runs; then the same queue
played for real, holder by holder, starts the runs in the order the estimates said."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.support.factories import make_dataset_row
from workbench.runs.devices import DeviceRequest
from workbench.runs.lifecycle import run_finish
from workbench.runs.models import Run
from workbench.runs.scheduler import schedule
from workbench.runs.services import run_create
from workbench.workers.simulation import simulate_hosts

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(owner):
    return make_dataset_row(owner)


def submit(owner, dataset, count: int, *, epochs: int, name: str) -> Run:
    return run_create(
        owner=owner,
        dataset=dataset,
        name=name,
        network="lenet",
        config={"epochs": epochs, "batch_size": 8},
        device_request=DeviceRequest.gpus(count),
    )


def finished_like(owner, dataset, count: int, *, epochs: int, seconds: float) -> None:
    """A done run of the same kind: how long a run like it takes."""
    run = submit(owner, dataset, count, epochs=epochs, name=f"earlier-{epochs}")
    end = timezone.now() - timedelta(days=1)
    Run.objects.filter(pk=run.pk).update(
        state=Run.State.DONE, started_at=end - timedelta(seconds=seconds), finished_at=end
    )


def seconds_from_now(run: Run) -> float | None:
    run.refresh_from_db()
    if run.estimated_start is None:
        return None
    return (run.estimated_start - timezone.now()).total_seconds()


def state_of(*runs: Run) -> list[str]:
    for run in runs:
        run.refresh_from_db()
    return [run.state for run in runs]


def test_it_plays_the_queue_forward_for_each_waiting_runs_estimate(owner, dataset):
    (host,) = simulate_hosts(hosts=1, gpus_per_host=2, prefix="estimates")
    finished_like(owner, dataset, 1, epochs=6, seconds=600)  # a run like A lasts 10 minutes
    finished_like(owner, dataset, 2, epochs=2, seconds=200)
    finished_like(owner, dataset, 1, epochs=1, seconds=100)  # like C: 100 s
    first, second = submit(owner, dataset, 1, epochs=9, name="h1"), submit(owner, dataset, 1, epochs=9, name="h2")
    schedule()
    assert state_of(first, second) == ["running", "running"]
    Run.objects.filter(pk=first.pk).update(eta_seconds=120)
    Run.objects.filter(pk=second.pk).update(eta_seconds=300)
    a = submit(owner, dataset, 1, epochs=6, name="A")
    b = submit(owner, dataset, 2, epochs=2, name="B")
    c = submit(owner, dataset, 1, epochs=1, name="C")
    schedule()

    # A takes the GPU freed at 120 s; B (2 GPUs) cannot start at 300 s, when one GPU is free,
    # so C starts there around it; B starts when A ends, at 120 + 600 s.
    estimates = [seconds_from_now(run) for run in (a, b, c)]
    for estimate, expected in zip(estimates, (120, 720, 300), strict=True):
        assert estimate is not None and abs(estimate - expected) < 5, estimates

    # The same queue played for real, in the order the estimates give (h1, h2, C, then A ends).
    run_finish(run=first, to_state=Run.State.DONE)
    schedule()
    assert state_of(a, b, c) == ["running", "waiting", "waiting"]
    run_finish(run=second, to_state=Run.State.DONE)
    schedule()
    assert state_of(a, b, c) == ["running", "waiting", "running"]
    run_finish(run=c, to_state=Run.State.DONE)
    schedule()
    assert state_of(a, b) == ["running", "waiting"]
    run_finish(run=a, to_state=Run.State.DONE)
    schedule()
    assert state_of(b) == ["running"]


def test_it_gives_no_estimate_that_rests_on_a_run_of_unknown_length(owner, dataset):
    simulate_hosts(hosts=1, gpus_per_host=2, prefix="estimates")
    holder = submit(owner, dataset, 2, epochs=9, name="holder")
    schedule()
    Run.objects.filter(pk=holder.pk).update(eta_seconds=60)
    unknown = submit(owner, dataset, 2, epochs=3, name="never ran before")
    after = submit(owner, dataset, 2, epochs=4, name="behind it")
    schedule()
    assert abs(seconds_from_now(unknown) - 60) < 5
    assert seconds_from_now(after) is None  # when `unknown` ends, nothing says


def test_it_estimates_a_new_run_behind_holders_that_have_not_reported_yet(owner, dataset):
    simulate_hosts(hosts=1, gpus_per_host=1, prefix="estimates")
    finished_like(owner, dataset, 1, epochs=5, seconds=400)
    holder = submit(owner, dataset, 1, epochs=5, name="just started")
    schedule()
    assert state_of(holder) == ["running"]  # no ETA of its own yet: one like it took 400 s
    queued = submit(owner, dataset, 1, epochs=9, name="new")
    schedule()
    assert abs(seconds_from_now(queued) - 400) < 5
