"""Pause, resume and abort of a run on two simulated GPUs with DataLoader workers, through the real
Celery worker: the trainer's whole process group gets SIGTERM (two ranks and their loader
workers), and the run must still end paused / aborted with a checkpoint at the step it stopped."""

import json
from pathlib import Path

import pytest

from tests.support.waiting import wait_for_state, wait_until
from tests.workbench.runs.conftest import TINY_CONFIG
from workbench.runs.models import Run
from workbench.runs.services import run_abort, run_pause, run_resume, run_submit

pytestmark = [pytest.mark.slow]

# Two loader workers per rank; long enough to act on; no periodic snapshots (only the best and
# the stops' checkpoints). The ranks agree on stopping every 2 steps. Validation
# after every step starts its (not persistent) loader workers anew each time, so the stop signal
# often comes while some of them start, as on real runs.
MULTI_CONFIG = {
    **TINY_CONFIG,
    "epochs": 2000,
    "val_interval": 1 / 6,
    "snapshot_interval": 0,
    "stop_check_interval": 2,
    "data": {"num_workers": 2},
}


def events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def steps_in(path: Path) -> list[int]:
    return [event["step"] for event in events(path) if event["type"] == "metrics"]


def checkpoints(run: Run) -> list[Path]:
    return sorted((run.run_dir / "checkpoints").glob("step_*.pt"))


def final_status(path: Path) -> dict:
    return [event for event in events(path) if event["type"] == "status"][-1]


def test_it_pauses_resumes_and_aborts_a_two_gpu_run_with_loader_workers(
    celery_worker, transactional_db, owner, make_dataset
):
    dataset = make_dataset(owner, train=48)
    run = run_submit(owner=owner, dataset=dataset, name="ddp-stop", network="lenet", config=MULTI_CONFIG, gpus="2")
    wait_for_state(run, Run.State.RUNNING, timeout=240)
    first = run.run_dir / "events-1.jsonl"
    # Signal only once the loop runs (its loader workers are up), so the stop lands mid-epoch.
    wait_until(lambda: any(step >= 3 for step in steps_in(first)), what="the first training steps", timeout=240)

    run_pause(run=run)
    wait_for_state(run, Run.State.PAUSED, Run.State.FAILED, Run.State.INTERRUPTED, timeout=180)
    assert run.state == Run.State.PAUSED, f"{run.state}: {run.error}\n{run.log_path.read_text()[-3000:]}"
    paused = final_status(first)
    assert paused["state"] == "stopped" and paused["checkpoint_saved"], paused
    paused_at = paused["step"]
    assert checkpoints(run)[-1].name == f"step_{paused_at:08d}.pt"

    run_resume(run=run)
    wait_for_state(run, Run.State.RUNNING, timeout=240)
    second = run.run_dir / "events-2.jsonl"
    wait_until(lambda: len(steps_in(second)) >= 3, what="training to continue after the resume", timeout=240)
    resumed = steps_in(second)
    assert resumed[:3] == [paused_at + 1, paused_at + 2, paused_at + 3], "resume must continue from the checkpoint"

    run_abort(run=run)
    wait_for_state(run, Run.State.ABORTED, Run.State.FAILED, Run.State.INTERRUPTED, timeout=180)
    assert run.state == Run.State.ABORTED, f"{run.state}: {run.error}\n{run.log_path.read_text()[-3000:]}"
    assert run.transitions.last().reason == "aborted by the user"
    aborted = final_status(second)
    assert aborted["state"] == "stopped" and aborted["checkpoint_saved"] and aborted["step"] > paused_at, aborted
    assert checkpoints(run)[-1].name == f"step_{aborted['step']:08d}.pt"
