"""Runs on a real Slurm cluster: munged, slurmctld and two slurmd on this machine (two nodes of
two GRES GPUs each, placeholders: the trainer uses gloo on the CPU, as simulated GPUs say),
the real follower process (manage.py follow_slurm) following the jobs, real trainers over two nodes."""

from __future__ import annotations

import io
import json
import sys

import pytest
import torch
from django.core.management import call_command

from datasets.models import Dataset
from tests.conftest import ServiceProcess, child_env
from tests.datasets.conftest import IMPORT_ROOT
from tests.support import shapes as drawn
from tests.support.slurm_cluster import (
    GPUS_PER_NODE,
    NODES,
    PARTITION,
    URGENT_PARTITION,
    SlurmCluster,
    slurm_available,
)
from tests.support.waiting import wait_for_state, wait_until
from tests.workbench.runs.conftest import TINY_CONFIG
from tests.workbench.runs.test_worker_runs import metric_steps
from trainer.checkpoint import CheckpointStore
from workbench.projects.models import GpuUsage
from workbench.runs.models import Run
from workbench.runs.services import run_abort, run_pause, run_resume, run_submit
from workbench.slurm import commands, words

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not slurm_available(), reason="Slurm is not installed (make test installs it)"),
]

# Outlasts any test that acts on it while it trains (an idle machine trains 500 of these epochs in
# 10 s, before a stopped controller is even noticed); the tests end it. Checkpoints every epoch,
# so that a stop has one to resume from.
LONG_CONFIG = {**TINY_CONFIG, "epochs": 50_000, "val_interval": 5, "snapshot_interval": 1, "keep_last": 2}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm")).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def slurm_follower(cluster, django_db_setup):
    """The follower as the run command starts it: its own process, `manage.py follow_slurm`."""
    env = child_env(
        WORKBENCH_SLURM="1",
        WORKBENCH_SLURM_PARTITION=PARTITION,
        WORKBENCH_SLURM_POLL_SECONDS="1",
        WORKBENCH_SIMULATED_GPUS="2",
        WORKBENCH_RUN_STOP_GRACE_SECONDS="50",
        **cluster.env,
    )
    follower = ServiceProcess("slurm-follower", [sys.executable, "manage.py", "follow_slurm"], env)
    wait_until(lambda: "following Slurm partition" in follower.tail(), what=follower.tail, timeout=60)
    yield follower
    follower.stop()


@pytest.fixture
def slurm(settings, cluster, slurm_follower, transactional_db, monkeypatch):
    """This test process submits to Slurm as the worker does; every job is gone afterwards."""
    settings.SLURM_ENABLED = True
    settings.SLURM_PARTITION = PARTITION
    for key, value in cluster.env.items():
        monkeypatch.setenv(key, value)
    yield cluster
    slurm_follower.check_alive()
    cluster.cancel_all()


def submit(owner, dataset, *, config=LONG_CONFIG, gpus="2", nodes=1, name="on slurm") -> Run:
    return run_submit(
        owner=owner,
        dataset=dataset,
        name=name,
        network="lenet",
        config=config,
        gpus=gpus,
        executor="slurm",
        nodes=nodes,
    )


def job_of(run: Run) -> commands.Job:
    run.refresh_from_db()
    return commands.jobs(name_prefix="wb-run")[run.slurm_job_id]


def trained_steps(run: Run, at_least: int) -> bool:
    run.refresh_from_db()
    steps = metric_steps(run)
    return bool(steps) and steps[-1] >= at_least


def test_it_trains_over_two_nodes_to_the_weights_of_one_process(slurm, owner, make_dataset):
    dataset = make_dataset(owner, train=48, val=9)
    config = {**TINY_CONFIG, "epochs": 1, "batch_size": 8, "metrics_interval": 2, "data": {"random_flip": True}}
    config["solver"] = {"optimizer": "sgd", "base_lr": 0.1, "momentum": 0.9}
    spanning = submit(owner, dataset, config=config, gpus="2", nodes=2, name="2 nodes x 2")
    assert spanning.device_request_text() == "2 nodes x 2 GPUs"
    wait_for_state(spanning, Run.State.DONE, Run.State.FAILED, Run.State.ABORTED, timeout=400)
    assert spanning.state == Run.State.DONE, spanning.error
    reasons = list(spanning.transitions.values_list("reason", flat=True))
    assert any(f"job {spanning.slurm_job_id}" in reason and "n[1-2]" in reason for reason in reasons), reasons
    assert metric_steps(spanning) == [2, 4, 6]
    # The first node reports the run; the second writes only its own outcome beside it.
    second = [json.loads(line) for line in (spanning.run_dir / "events-1.node1.jsonl").read_text().splitlines()]
    assert not [e for e in second if e["type"] == "metrics"] and second[-1]["state"] == "done", second[-3:]
    launch = json.loads((spanning.run_dir / "launch-1.json").read_text())
    assert launch["nodes"] == 2 and launch["devices"] == ["cpu", "cpu"]
    # A sampler beside each node's trainer gives the run the charts of a local one: every GPU of
    # the job once (numbered as the ranks are), each node's host.
    samples = [event.data for event in spanning.events.filter(kind="system")]
    assert {sample["node"] for sample in samples} == {"n1", "n2"}
    assert {gpu["index"] for sample in samples for gpu in sample["gpus"]} == {0, 1, 2, 3}
    assert any("host_cpu_percent" in sample for sample in samples)
    assert any("node1_host_cpu_percent" in sample for sample in samples)
    # Its GPU-hours in the quotas' ledger are what the cluster's accounting says (elapsed x
    # AllocTRES gres/gpu), not the follower's estimate, which is a poll late at each end.
    used = GpuUsage.objects.filter(job_kind="run", job_id=spanning.pk)
    wait_until(lambda: used.filter(accounted_by="sacct").exists(), what=lambda: list(used.values()), timeout=60)
    sacct = slurm.command("sacct", "-nPXD", f"-j{spanning.slurm_job_id}", "--format=ElapsedRaw,AllocTRES").stdout
    elapsed, tres = sacct.split()[0].split("|")
    assert "gres/gpu=4" in tres.split(","), sacct
    assert sum((row.end - row.start).total_seconds() * row.gpus for row in used) == pytest.approx(
        int(elapsed) * 4, rel=0.01
    )

    # The same training in this process, one rank of the whole batch: the four ranks of two nodes
    # see exactly its samples (trainer/data.py's ShardedSampler), so they reach its weights, as
    # tests/trainer/test_distributed.py shows for two local ranks against one.
    from tests.trainer.conftest import make_config
    from trainer.events import ListReporter
    from trainer.run import train

    whole = make_config(spanning.run_dir.parent / "one", dataset.path, devices="cpu", **config)
    assert train(whole, reporter=ListReporter()) == 0
    one = CheckpointStore.load(CheckpointStore(whole.run_dir).latest())
    two = CheckpointStore.load(CheckpointStore(spanning.run_dir).latest())
    assert one["step"] == two["step"] == 6
    for key, value in one["model"].items():
        torch.testing.assert_close(two["model"][key], value, rtol=1e-4, atol=1e-5)


def test_it_shows_slurms_reason_while_a_job_waits_for_gpus(slurm, owner, make_dataset):
    dataset = make_dataset(owner)
    holders = [submit(owner, dataset, nodes=2, name="holder")]
    wait_for_state(holders[0], Run.State.RUNNING, timeout=120)
    waiting = submit(owner, dataset, gpus="2", name="waiter")

    def reason() -> str:
        waiting.refresh_from_db()
        return "Resources" in waiting.wait_reason and waiting.wait_reason

    text = wait_until(reason, what="Slurm's pending reason", timeout=60)
    assert waiting.state == Run.State.WAITING
    assert (
        text
        == f"Slurm job {waiting.slurm_job_id}: waiting for the GPUs or nodes it asked for to free up (Slurm: Resources)"
    )
    run_abort(run=waiting)
    wait_for_state(waiting, Run.State.ABORTED, timeout=60)
    assert not job_of(waiting).is_active
    run_abort(run=holders[0])
    wait_for_state(holders[0], Run.State.ABORTED, timeout=180)


def test_it_aborts_with_a_checkpoint_and_leaves_no_process(slurm, owner, make_dataset):
    dataset = make_dataset(owner)
    run = submit(owner, dataset, nodes=2)
    wait_until(lambda: trained_steps(run, 20), what="training on Slurm", timeout=240)
    run_abort(run=run)
    wait_for_state(run, Run.State.ABORTED, timeout=200)
    assert run.transitions.last().reason == "aborted by the user"
    assert sorted((run.run_dir / "checkpoints").glob("step_*.pt"))
    job = job_of(run)
    assert not job.is_active
    # No trainer is left on either node.
    processes = json.loads((run.run_dir / "processes.json").read_text())["ranks"]
    processes += json.loads((run.run_dir / "processes.node1.json").read_text())["ranks"]
    import psutil

    assert not [pid for pid in processes if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]


def file_steps(run: Run, attempt: int) -> list[int]:
    lines = (run.run_dir / f"events-{attempt}.jsonl").read_text().splitlines()
    return [event["step"] for event in map(json.loads, lines) if event.get("type") == "metrics"]


def trained_on_after(run: Run, earlier: int) -> bool:
    """The next attempt has stored a step past the last one the earlier attempt wrote."""
    run.refresh_from_db()
    return run.attempt == earlier + 1 and trained_steps(run, max(file_steps(run, earlier), default=0) + 1)


def resumed_without_gaps(run: Run) -> None:
    """The second attempt resumed from a checkpoint, and every step is stored once, in order; then
    the run (LONG_CONFIG: it would train on) is aborted."""
    steps = metric_steps(run)
    assert steps == list(range(1, steps[-1] + 1))
    second = [json.loads(line) for line in (run.run_dir / "events-2.jsonl").read_text().splitlines()]
    resumed = next(e for e in second if e.get("type") == "status" and e.get("state") == "running")
    assert resumed["resumed_from_step"] > 0
    run_abort(run=run)
    wait_for_state(run, Run.State.ABORTED, timeout=200)


def release(cluster: SlurmCluster, job_id: str) -> None:
    # Slurm holds a requeued job for two minutes (BeginTime) before it may start again; an
    # administrator's release, so that the test does not wait them out.
    cluster.command("scontrol", "update", f"jobid={job_id}", "StartTime=now", check=False)


def test_it_resumes_from_its_checkpoint_when_its_node_fails(slurm, owner, make_dataset):
    dataset = make_dataset(owner)
    run = submit(owner, dataset, gpus="1")  # LONG_CONFIG: aborted once it has resumed
    wait_until(lambda: trained_steps(run, 15), what="training on Slurm", timeout=240)
    node = job_of(run).nodes
    # The node dies (slurmd and the trainer at once, no checkpoint on the way out): the job ends
    # NODE_FAIL and Slurm requeues it, as the workbench submits with --requeue; the next attempt
    # runs on the other node, from the last checkpoint the trainer saved by its interval.
    slurm.lose_node(node)
    try:
        wait_until(lambda: run.refresh_from_db() or run.attempt == 2, what="the node failure to be seen", timeout=120)
        release(slurm, run.slurm_job_id)
        wait_until(lambda: trained_on_after(run, 1), what="the next attempt to train on", timeout=300)
    finally:
        slurm.restore_node(node)
    assert node not in job_of(run).nodes
    reasons = list(run.transitions.values_list("reason", flat=True))
    # Seen as the requeue it is, or (a look between the two) as its end and then a new job.
    seen = (f"requeued by Slurm (job {run.slurm_job_id}, attempt 2)", words.end_words("NODE_FAIL"))
    assert any(reason.startswith(seen) for reason in reasons), reasons
    resumed_without_gaps(run)


def test_it_resumes_on_a_new_job_when_slurm_preempts_it(slurm, owner, make_dataset):
    dataset = make_dataset(owner)
    run = submit(owner, dataset, gpus="1")  # LONG_CONFIG: aborted once it has resumed
    wait_until(lambda: trained_steps(run, 15), what="training on Slurm", timeout=240)
    preempted = run.slurm_job_id
    # A job of the urgent partition takes every GPU: Slurm cancels the run's job (PreemptMode=CANCEL).
    slurm.command(
        "sbatch", f"--partition={URGENT_PARTITION}", f"--nodes={len(NODES)}", f"--gres=gpu:{GPUS_PER_NODE}",
        "--output=/dev/null", "--wrap=sleep 3",
    )  # fmt: skip
    wait_until(lambda: trained_on_after(run, 1), what="the next attempt to train on", timeout=300)
    assert run.slurm_job_id != preempted  # a new job
    interrupted = run.transitions.get(to_state=Run.State.INTERRUPTED)
    assert interrupted.reason.startswith(f"interrupted: {words.end_words('PREEMPTED')} (job {preempted})")
    resumed_without_gaps(run)


def test_it_fails_a_run_whose_job_reached_its_time_limit(slurm, owner, make_dataset):
    dataset = make_dataset(owner)
    run = submit(owner, dataset, gpus="1")  # LONG_CONFIG: Slurm's time limit ends it
    wait_until(lambda: trained_steps(run, 5), what="training on Slurm", timeout=240)
    # Its time limit, reached now: Slurm ends the job TIMEOUT at its next check (about every 30 s).
    slurm.command("scontrol", "update", f"jobid={run.slurm_job_id}", "EndTime=now")
    wait_for_state(run, Run.State.FAILED, Run.State.ABORTED, Run.State.DONE, Run.State.INTERRUPTED, timeout=180)
    assert run.state == Run.State.FAILED
    # The same limit would end it again: failed, not resumed (attempts/outcome.py, step 7).
    assert run.transitions.last().reason.startswith(f"{words.end_words('TIMEOUT')} (job {run.slurm_job_id})")
    assert run.attempt == 1


def test_it_trains_a_segmentation_net_over_two_nodes_and_aborts_when_cancelled_in_slurm(
    slurm, owner, settings, tmp_path
):
    # A task network on Slurm as on the local worker (issue 22): over two nodes, its mIoU and its
    # GPUs' samples from both nodes stored, then the job cancelled in Slurm.
    settings.IMPORT_ROOTS = [IMPORT_ROOT]
    source = drawn.write_voc_masks(IMPORT_ROOT / tmp_path.name, drawn.make_shapes(12, size=(32, 32)))
    out = io.StringIO()
    call_command("import_dataset", str(source), "--task", "segmentation", "--image-size", "32x32",
                 "--owner", owner.username, "--sync", stdout=out, stderr=io.StringIO())  # fmt: skip
    dataset = Dataset.objects.get(pk=int(out.getvalue().splitlines()[0]))
    config = {**LONG_CONFIG, "val_interval": 1, "data": {"num_workers": 0}}
    run = run_submit(owner=owner, dataset=dataset, name="segment on slurm", network="lraspp_mobilenet_v3_large",
                     config=config, gpus="1", executor="slurm", nodes=2)  # fmt: skip
    wait_until(lambda: run.events.filter(kind="validation").exists(), what="a validation on Slurm", timeout=300)
    assert 0 <= run.events.filter(kind="validation").first().data["miou"] <= 1
    wait_until(
        lambda: {e.data["node_rank"] for e in run.events.filter(kind="system")} == {0, 1}, what="both nodes' samples"
    )
    run.refresh_from_db()
    slurm.command("scancel", run.slurm_job_id)
    wait_for_state(run, Run.State.ABORTED, Run.State.FAILED, timeout=180)
    assert run.state == Run.State.ABORTED
    assert (
        run.transitions.last().reason
        == f"cancelled in Slurm (scancel, by an administrator or the job's account) (job {run.slurm_job_id})"
    )


def test_it_loses_nothing_while_the_controller_is_down(slurm, owner, make_dataset):
    dataset = make_dataset(owner)
    run = submit(owner, dataset, gpus="1")  # LONG_CONFIG: it is aborted below
    wait_until(lambda: trained_steps(run, 5), what="training on Slurm", timeout=240)
    from workbench.runs.slurm_status import controller_status

    slurm.stop_controller()
    try:
        wait_until(
            lambda: controller_status().get("answers") is False,
            what="the follower to see the controller down",
            timeout=120,
        )
        run.refresh_from_db()
        assert run.state == Run.State.RUNNING
        before = metric_steps(run)[-1]
        # The curves go on: the events are on shared storage, not with the controller.
        wait_until(lambda: trained_steps(run, before + 5), what="events while the controller is down", timeout=120)
    finally:
        slurm.start_controller()
    wait_until(lambda: controller_status().get("answers") is True, what="the controller to answer again", timeout=120)
    run.refresh_from_db()
    assert run.state == Run.State.RUNNING and run.slurm_state == "RUNNING"
    # Followed again: an abort reaches the job through Slurm, and every step is stored once.
    run_abort(run=run)
    wait_for_state(run, Run.State.ABORTED, timeout=200)
    steps = metric_steps(run)
    assert steps == list(range(1, steps[-1] + 1)) and steps[-1] >= before + 5


def test_it_pauses_and_resumes_with_a_new_job(slurm, owner, make_dataset):
    dataset = make_dataset(owner)
    run = submit(owner, dataset, gpus="1")  # LONG_CONFIG: aborted once it has resumed
    wait_until(lambda: trained_steps(run, 10), what="training on Slurm", timeout=240)
    first_job = run.slurm_job_id
    run_pause(run=run)
    wait_for_state(run, Run.State.PAUSED, timeout=200)
    run_resume(run=run)
    # Training on past the pause's checkpoint in a new job is the resume; a run to the end after
    # it is test_worker_runs' (the same attempt machinery), and took this test 25 s more.
    wait_until(lambda: trained_on_after(run, 1), what="the resumed job to train on", timeout=300)
    assert run.slurm_job_id not in ("", first_job)
    resumed_without_gaps(run)
