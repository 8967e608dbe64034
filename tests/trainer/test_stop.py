"""Stopping by SIGTERM to the trainer's whole process group, as the runs app aborts and pauses.

With DataLoader workers and 1 or 2 processes, whenever the signal comes (while validation
starts its loader workers, or before the ranks are even up), the run ends with EXIT_STOPPED and a
checkpoint at the step it stopped at, and `--resume` continues from exactly that step.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.waiting import wait_until
from trainer.checkpoint import CheckpointStore
from trainer.config import TrainConfig
from trainer.protocol import EXIT_DONE, EXIT_STOPPED

from .conftest import make_config

REPO = Path(__file__).resolve().parents[2]
STEPS_PER_EPOCH = 6  # gray8: 48 training images in batches of 8
DEADLINE_S = 300  # generous: two ranks and their loader workers share two busy cores

pytestmark = [pytest.mark.slow]


def events_of(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Trainer:
    """`python -m trainer train` in a session of its own, as the runs app starts it."""

    def __init__(self, tmp_path: Path, cfg: TrainConfig, *, resume: bool = False) -> None:
        cfg.save(tmp_path / "run.json")
        self.events = tmp_path / ("events-resumed.jsonl" if resume else "events.jsonl")
        argv = [sys.executable, "-m", "trainer", "train", "--config", str(tmp_path / "run.json")]
        argv += ["--events", str(self.events), *(["--resume"] if resume else [])]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen(argv, env=env, cwd=tmp_path, start_new_session=True)

    def wait_until(self, predicate, what: str) -> None:
        def reached() -> bool:
            if predicate():
                return True
            assert self.proc.poll() is None, f"the trainer exited ({self.proc.returncode}) before {what}"
            return False

        wait_until(reached, what=what, timeout=DEADLINE_S, interval=0.05)

    def metric_steps(self) -> list[int]:
        return [event["step"] for event in events_of(self.events) if event["type"] == "metrics"]

    def signal_group(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)  # the launcher, every rank, every loader worker

    def wait(self) -> int:
        try:
            return self.proc.wait(timeout=DEADLINE_S)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def check_stopped_and_resume(tmp_path: Path, cfg: TrainConfig, trainer: Trainer) -> None:
    """The run stopped with a checkpoint at its last step, and a resume carries on from there."""
    code = trainer.wait()
    final = events_of(trainer.events)[-1]
    assert code == EXIT_STOPPED, f"exit code {code}: {final}"
    assert final["type"] == "status" and final["state"] == "stopped" and final["checkpoint_saved"], final
    stopped_at = final["step"]
    if cfg.world_size > 1:
        assert stopped_at % cfg.stop_check_interval == 0  # the ranks stopped at one agreed step
    latest = CheckpointStore(cfg.run_dir).latest()
    assert latest is not None and latest.name == f"step_{stopped_at:08d}.pt"
    assert len(CheckpointStore.load(latest)["rng"]) == cfg.world_size  # every rank's RNG stream

    cfg.epochs = (stopped_at + 2) / STEPS_PER_EPOCH  # two more steps
    cfg.val_interval = 0  # (only at the end: quicker)
    resumed = Trainer(tmp_path, cfg, resume=True)
    assert resumed.wait() == EXIT_DONE, events_of(resumed.events)[-1]
    running = next(e for e in events_of(resumed.events) if e["type"] == "status" and e["state"] == "running")
    assert running["resumed_from_step"] == stopped_at
    assert resumed.metric_steps() == [stopped_at + 1, stopped_at + 2]


def test_it_stops_two_ranks_on_sigterm_to_the_process_group_while_validation_starts_loader_workers(tmp_path, gray8):
    # Validation after every step: its loader workers (not persistent) start anew each time, so
    # the signal lands while some of them are starting, as it often did on real runs. Two ranks,
    # each with its loader workers: the process group the runs app signals to pause or abort a
    # run on two GPUs (tests/workbench/runs/test_worker_runs.py pauses, resumes and aborts through
    # the real worker; a signal while two ranks start is below).
    cfg = make_config(
        tmp_path / "run",
        gray8,
        devices="cpu x 2",
        epochs=1000,
        val_interval=1 / STEPS_PER_EPOCH,
        snapshot_interval=0,
        stop_check_interval=2,
        data={"num_workers": 2},
    )
    trainer = Trainer(tmp_path, cfg)
    # Rank 0 reports step n's metrics just before it validates (and forks loader workers).
    trainer.wait_until(lambda: trainer.metric_steps(), "the first step")
    trainer.signal_group()
    check_stopped_and_resume(tmp_path, cfg, trainer)


def test_it_stops_on_sigterm_that_comes_while_the_ranks_start(tmp_path, gray8):
    cfg = make_config(
        tmp_path / "run",
        gray8,
        devices="cpu x 2",
        epochs=1000,
        val_interval=0,
        snapshot_interval=0,
        stop_check_interval=2,
        data={"num_workers": 2},
    )
    trainer = Trainer(tmp_path, cfg)
    # The launcher writes this as soon as it has started the ranks, long before they have
    # imported torch and set up their handlers.
    trainer.wait_until(lambda: (Path(cfg.run_dir) / "processes.json").exists(), "the ranks to be started")
    trainer.signal_group()
    check_stopped_and_resume(tmp_path, cfg, trainer)
