"""Runs on real worker processes: multi-process training, abort, pause and resume, a killed worker."""

import json

import psutil
import pytest

from tests.conftest import start_worker
from tests.support.waiting import wait_for_state, wait_until
from tests.workbench.runs.conftest import TINY_CONFIG
from workbench.celery import app as celery_app
from workbench.runs.models import Run
from workbench.runs.services import run_abort, run_pause, run_resume, run_submit
from workbench.runs.tasks import train_run
from workbench.workers.models import Device

pytestmark = [pytest.mark.slow]

# Long enough to act on while it trains; checkpoints often so a resume has one.
LONG_CONFIG = {**TINY_CONFIG, "epochs": 2000, "val_interval": 5, "snapshot_interval": 1, "keep_last": 2}


def checkpoints(run: Run) -> list:
    return sorted((run.run_dir / "checkpoints").glob("step_*.pt"))


def trainer_tree(run: Run) -> list[psutil.Process]:
    run.refresh_from_db()
    root = psutil.Process(run.trainer_pid)
    return [root, *root.children(recursive=True)]


def metric_steps(run: Run) -> list[int]:
    return list(run.events.filter(kind="metrics").order_by("seq").values_list("step", flat=True))


def test_it_trains_with_ddp_on_two_simulated_gpus(celery_worker, transactional_db, owner, make_dataset):
    dataset = make_dataset(owner)
    run = run_submit(owner=owner, dataset=dataset, name="ddp", network="lenet", config=TINY_CONFIG, gpus="2")
    wait_for_state(run, Run.State.DONE, Run.State.FAILED)
    assert run.state == Run.State.DONE, run.error
    started = run.transitions.get(to_state="running").reason
    assert started.startswith("started on test-worker@") and started.endswith("GPU 0, GPU 1")
    launch = (run.run_dir / "launch-1.json").read_text()
    assert '"cpu",\n    "cpu"' in launch  # two gloo processes stand in for the two GPUs


def test_it_trains_a_network_split_over_two_simulated_gpus(celery_worker, transactional_db, owner, make_dataset):
    dataset = make_dataset(owner)
    config = {**TINY_CONFIG, "model_parallel": 2}
    run = run_submit(owner=owner, dataset=dataset, name="split", network="lenet", config=config, gpus="2")
    wait_for_state(run, Run.State.DONE, Run.State.FAILED)
    assert run.state == Run.State.DONE, run.error
    launch = json.loads((run.run_dir / "launch-1.json").read_text())
    assert launch["devices"] == ["cpu", "cpu"] and launch["model_parallel"] == 2  # one process, two stages
    lines = [event.data["line"] for event in run.events.filter(kind="log")]
    assert any("model parallel: stage 2 of 2 on cpu: classifier." in line for line in lines), lines


def test_it_aborts_a_run_and_stops_every_trainer_process(celery_worker, transactional_db, owner, make_dataset):
    dataset = make_dataset(owner)
    run = run_submit(owner=owner, dataset=dataset, name="long", network="lenet", config=LONG_CONFIG, gpus="cpu")
    wait_for_state(run, Run.State.RUNNING)
    wait_until(lambda: metric_steps(run), what="the first metrics")
    processes = trainer_tree(run)
    keeps_its_run_while_its_heartbeat_is_late(run)
    run_abort(run=run)
    wait_for_state(run, Run.State.ABORTED, timeout=90)
    gone, alive = psutil.wait_procs(processes, timeout=10)
    assert not alive, f"trainer processes left: {alive}"
    assert not Device.objects.filter(run=run).exists()
    assert run.transitions.last().reason == "aborted by the user"
    assert checkpoints(run), "SIGTERM should have saved a checkpoint"


def keeps_its_run_while_its_heartbeat_is_late(run: Run) -> None:
    # A worker whose heartbeat is late (a loaded host) but whose watch still follows the trainer
    # keeps its run: a pass that finds the host silent reclaims nothing. Before, the run was
    # interrupted, relaunched beside its own trainer, and then ended "aborted by the user".
    from datetime import timedelta

    from django.conf import settings
    from django.db import transaction
    from django.utils import timezone

    from workbench.runs.scheduler import schedule
    from workbench.workers.models import WorkerHost

    wait_until(lambda: Run.objects.get(pk=run.pk).watched_at, what="the watch to say it follows the trainer")
    silent = timezone.now() - timedelta(seconds=settings.WORKER_TIMEOUT_SECONDS + 5)
    # One transaction: the worker's own beat cannot make the host fresh between the two.
    with transaction.atomic():
        WorkerHost.objects.filter(pk=run.host_id).update(last_seen=silent)
        assert not WorkerHost.objects.get(pk=run.host_id).is_online
        reclaimed = schedule()["reclaimed"]
    run.refresh_from_db()
    assert (reclaimed, run.state, run.attempt) == (0, Run.State.RUNNING, 1)


def test_it_pauses_and_resumes_from_the_checkpoint(celery_worker, transactional_db, owner, make_dataset):
    dataset = make_dataset(owner, train=48)
    # 400 epochs: at 40 a quiet machine trained the whole run between the test seeing the first
    # checkpoint and asking for the pause (a clean-clone run: "now done"); resumed, it still ends
    # in seconds.
    config = {**LONG_CONFIG, "epochs": 400}
    run = run_submit(owner=owner, dataset=dataset, name="pausable", network="lenet", config=config, gpus="cpu")
    wait_for_state(run, Run.State.RUNNING)
    wait_until(lambda: checkpoints(run), what="a first checkpoint")
    run_pause(run=run)
    wait_for_state(run, Run.State.PAUSED, timeout=90)
    assert not Device.objects.filter(run=run).exists()
    steps_before = metric_steps(run)
    run_resume(run=run)
    wait_for_state(run, Run.State.DONE, Run.State.FAILED, timeout=240)
    assert run.state == Run.State.DONE, run.error
    assert run.attempt == 2
    assert "resumed from" in run.log_path.read_text()
    steps = metric_steps(run)
    assert steps[: len(steps_before)] == steps_before
    assert steps == sorted(set(steps)), "metric steps must be strictly increasing"
    # (A run may wait a moment for the worker's first heartbeat after the previous test.)
    states = [t.to_state for t in run.transitions.all() if t.to_state != "waiting"]
    assert states == ["queued", "running", "paused", "queued", "running", "done"]


def trainer_events(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_it_resumes_a_run_after_its_worker_is_killed_storing_what_the_trainer_wrote_once(
    celery_worker, transactional_db, owner, make_dataset
):
    crash_worker = start_worker("crash-worker", WORKBENCH_SIMULATED_GPUS="1")
    try:
        dataset = make_dataset(owner, train=48)
        config = {**LONG_CONFIG, "epochs": 40}
        gpus = f"{crash_worker.nodename}:0"
        run = run_submit(owner=owner, dataset=dataset, name="crashy", network="lenet", config=config, gpus=gpus)
        wait_for_state(run, Run.State.RUNNING)
        wait_until(lambda: checkpoints(run) and len(metric_steps(run)) > 5, what="a checkpoint and some metrics")
        processes = trainer_tree(run)

        crash_worker.kill()

        # The trainer learns of its worker's death (SIGTERM from the kernel), writes its last
        # events (metrics, "stopped by SIGTERM at step N") that nobody reads now, and exits.
        gone, alive = psutil.wait_procs(processes, timeout=60)
        assert not alive
        first_attempt = trainer_events(run.run_dir / "events-1.jsonl")
        assert first_attempt[-1]["type"] == "status" and "stopped by SIGTERM" in first_attempt[-1]["message"]
        # The other worker's scheduler notices the silent host and interrupts the run.
        wait_for_state(run, Run.State.INTERRUPTED, timeout=60)
        assert "stopped sending heartbeats" in run.transitions.last().reason
        assert not Device.objects.filter(run=run).exists()

        crash_worker = start_worker("crash-worker", WORKBENCH_SIMULATED_GPUS="1")
        wait_for_state(run, Run.State.DONE, Run.State.FAILED, timeout=240)
        assert run.state == Run.State.DONE, run.error
        assert run.attempt == 2
        steps = metric_steps(run)
        assert steps == sorted(set(steps)), "metric steps must be strictly increasing, without duplicates"
        seqs = list(run.events.values_list("seq", flat=True))
        assert seqs == list(range(1, len(seqs) + 1))
        # Everything the first attempt's trainer wrote is stored exactly once, its end included.
        for event in first_attempt:
            stored = run.events.filter(kind=event["type"], time=event["time"]).count()
            assert stored == 1, f"{event} stored {stored} times"
        assert first_attempt[-1]["message"] in [e.data.get("message") for e in run.events.filter(kind="status")]
    finally:
        crash_worker.stop()


def test_it_starts_nothing_on_a_duplicate_delivery(celery_worker, transactional_db, owner, make_dataset):
    dataset = make_dataset(owner)
    run = run_submit(owner=owner, dataset=dataset, name="once", network="lenet", config=LONG_CONFIG, gpus="cpu")
    wait_for_state(run, Run.State.RUNNING)
    wait_until(lambda: metric_steps(run), what="the first metrics")
    run.refresh_from_db()
    first_trainer = run.trainer_pid
    # The same message again, through the broker to the same host's queue...
    duplicate = train_run.apply_async(args=[run.pk, run.attempt], queue=run.host.queue)
    assert duplicate.get(timeout=30) == "duplicate"
    # ...and a stale one for an attempt that never was.
    assert train_run.apply(args=[run.pk, run.attempt + 1]).get() == "duplicate"
    run.refresh_from_db()
    assert run.trainer_pid == first_trainer
    assert sorted(p.name for p in run.run_dir.glob("launch-*.json")) == ["launch-1.json"]
    run_abort(run=run)
    wait_for_state(run, Run.State.ABORTED, timeout=90)


def test_it_stops_the_trainer_of_a_worker_that_is_stopping_so_the_run_resumes(
    celery_worker, transactional_db, owner, make_dataset
):
    # A worker on its way out (here a remote shutdown; in issue 11 an unrecoverable consumer
    # error) waits for its running tasks before it exits: a days-long run must not keep it
    # alive and deaf. Its trainer stops with a checkpoint and the run is interrupted, to resume.
    from workbench.celery import app

    stopping_worker = start_worker("stopping-worker", WORKBENCH_SIMULATED_GPUS="1")
    try:
        dataset = make_dataset(owner, train=48)
        gpus = f"{stopping_worker.nodename}:0"
        run = run_submit(owner=owner, dataset=dataset, name="stays", network="lenet", config=LONG_CONFIG, gpus=gpus)
        wait_for_state(run, Run.State.RUNNING)
        wait_until(lambda: metric_steps(run), what="the first metrics")
        processes = trainer_tree(run)

        app.control.shutdown(destination=[stopping_worker.nodename])

        wait_for_state(run, Run.State.INTERRUPTED, timeout=90)
        # The first interruption is the worker's own stop. (Later passes may place the run on that
        # host again while its last heartbeat is fresh, and interrupt it once more when it is not.)
        first = run.transitions.filter(to_state=Run.State.INTERRUPTED).order_by("pk").first()
        assert "its worker stopped" in first.reason
        assert checkpoints(run), "the trainer should have saved a checkpoint"
        gone, alive = psutil.wait_procs(processes, timeout=30)
        assert not alive
        wait_until(lambda: stopping_worker.process.poll() is not None, what="the worker process to exit", timeout=60)
    finally:
        stopping_worker.stop()


def test_it_resends_a_launch_the_broker_did_not_take(celery_worker, transactional_db, owner, make_dataset, monkeypatch):
    from datetime import timedelta

    from django.db import transaction
    from django.utils import timezone
    from kombu.exceptions import OperationalError

    from datasets.models import Dataset
    from workbench.runs.scheduler import schedule

    dataset = make_dataset(owner)
    # Building: the worker's own passes leave the run waiting until this test places it.
    Dataset.objects.filter(pk=dataset.pk).update(status=Dataset.Status.BUILDING)
    run = run_submit(owner=owner, dataset=dataset, name="lost launch", network="lenet", config=TINY_CONFIG, gpus="cpu")

    def broker_down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to the broker. Connection refused.")

    # The suite's worker announces its devices again after the database flush between tests:
    # the pass below can only place the run once the worker's CPU is back in the inventory.
    wait_until(
        lambda: Device.objects.filter(kind="cpu", run__isnull=True, host__hostname=celery_worker.nodename).exists(),
        what="the suite's worker to announce its free CPU",
    )
    # The scheduler sends the launch by the task's name through the Celery app.
    monkeypatch.setattr(celery_app, "send_task", broker_down)
    with transaction.atomic():  # the worker's passes see the dataset ready only with the run placed
        Dataset.objects.filter(pk=dataset.pk).update(status=Dataset.Status.READY)
        assert schedule()["started"] == 1
    monkeypatch.undo()
    run.refresh_from_db()
    assert run.state == Run.State.RUNNING and run.launched_attempt == 0
    # As if the grace of two worker timeouts had passed with no trainer started.
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
    schedule()
    wait_for_state(run, Run.State.DONE, Run.State.FAILED)
    assert run.state == Run.State.DONE and run.attempt == 1, run.error
