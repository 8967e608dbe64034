"""DDP on the CPU with gloo: two processes equal one, and a dying rank ends the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
import torchvision

from tests.support.trainer_data import make_dataset_folder
from tests.support.waiting import wait_until
from trainer.checkpoint import CheckpointStore
from trainer.events import ListReporter
from trainer.protocol import EXIT_CONFIG, EXIT_DONE, EXIT_FAILED, EXIT_NONFINITE
from trainer.run import train

from .conftest import make_config

REPO = Path(__file__).resolve().parents[2]


def test_it_reaches_the_same_weights_with_two_processes_as_with_one(tmp_path):
    # 9 validation images: rank 0 gets 5 (two batches of 4), rank 1 gets 4 (one batch); uneven
    # shards must neither hang nor skew the metrics.
    dataset = make_dataset_folder(tmp_path / "ds", num_classes=3, size=8, channels=1, train=48, val=9)

    def run(name: str, devices) -> tuple[dict, ListReporter]:
        cfg = make_config(
            tmp_path / name,
            dataset,
            devices=devices,
            epochs=1,
            batch_size=8,
            metrics_interval=2,
            data={"random_flip": True},
            solver={"optimizer": "sgd", "base_lr": 0.1, "momentum": 0.9},
        )
        reporter = ListReporter()
        assert train(cfg, reporter=reporter) == EXIT_DONE, reporter.events[-1]
        return CheckpointStore.load(CheckpointStore(tmp_path / name).latest()), reporter

    one, one_events = run("one", ["cpu"])
    two, two_events = run("two", "cpu x 2")
    assert one["step"] == two["step"] == 6
    for key, value in one["model"].items():
        torch.testing.assert_close(two["model"][key], value, rtol=1e-4, atol=1e-5)
    # Only rank 0 reports: one metrics event per interval, with the total and per-process rate.
    assert [m["step"] for m in two_events.of_type("metrics")] == [2, 4, 6]
    metrics = two_events.of_type("metrics")[-1]
    assert metrics["images_per_sec"] == metrics["images_per_sec_per_process"] * 2
    val_one, val_two = one_events.of_type("validation")[-1], two_events.of_type("validation")[-1]
    assert abs(val_two["val_loss"] - val_one["val_loss"]) < 1e-4 and val_two["top1"] == val_one["top1"]
    # The reported loss is the mean over both ranks' halves of each global batch.
    for m1, m2 in zip(one_events.of_type("metrics"), two_events.of_type("metrics"), strict=True):
        assert abs(m1["loss"] - m2["loss"]) < 1e-4
    assert two_events.events[-1]["state"] == "done"


def start_training(tmp_path, cfg):
    """`python -m trainer train` in its own session, returned once the first metrics are written."""
    cfg.save(tmp_path / "run.json")
    events = tmp_path / "events.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainer", "train", "--config", str(tmp_path / "run.json"), "--events", str(events)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
        start_new_session=True,
    )

    def started() -> bool:
        if events.exists() and '"type":"metrics","time"' in events.read_text():
            return True
        assert proc.poll() is None, f"the trainer exited ({proc.returncode}) before training"
        return False

    try:
        wait_until(started, what="training to start (a first metrics event)", timeout=120, interval=0.1)
    except BaseException:  # pytest.fail's exception is no Exception: the trainer must not outlive it
        proc.kill()
        raise
    return proc, events


def test_it_ends_the_run_when_a_rank_dies(tmp_path, gray8):
    cfg = make_config(
        tmp_path / "run", gray8, devices="cpu x 2", epochs=1000, snapshot_interval=0, val_interval=0, dist_timeout_s=60
    )
    proc, events = start_training(tmp_path, cfg)
    try:
        ranks = json.loads((tmp_path / "run" / "processes.json").read_text())["ranks"]
        os.kill(ranks[1], signal.SIGKILL)
        started = time.monotonic()
        assert proc.wait(timeout=60) == EXIT_FAILED
        assert time.monotonic() - started < 30  # ended promptly, far below dist_timeout_s
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    final = [json.loads(line) for line in events.read_text().splitlines()][-1]
    assert final["type"] == "status" and final["state"] == "failed" and final["exit_code"] == EXIT_FAILED
    assert final["message"].startswith("rank 1 (pid ") and "was killed by SIGKILL" in final["message"], final
    for pid in ranks:  # no orphans left behind
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()


def test_it_reports_the_root_cause_when_one_rank_fails(tmp_path, gray8):
    # A diverging LR: rank 0 detects the NaN loss and exits; rank 1 then fails in a collective.
    # The run's message must be the NaN, not rank 1's "connection closed by peer".
    cfg = make_config(
        tmp_path / "run",
        gray8,
        devices="cpu x 2",
        epochs=5,
        stop_check_interval=1,
        solver={"optimizer": "sgd", "base_lr": 10, "momentum": 0.9},  # the largest rate accepted
    )
    reporter = ListReporter()
    assert train(cfg, reporter=reporter) == EXIT_NONFINITE
    final = reporter.events[-1]
    assert final["state"] == "failed" and final["exit_code"] == EXIT_NONFINITE
    assert final["message"].startswith("rank 0: training loss became "), final["message"]


def test_it_stops_all_ranks_at_one_step_on_sigterm_saves_and_resumes(tmp_path, gray8):
    cfg = make_config(
        tmp_path / "run",
        gray8,
        devices="cpu x 2",
        epochs=1000,
        snapshot_interval=0,
        val_interval=0,
        stop_check_interval=2,
    )
    proc, events = start_training(tmp_path, cfg)
    try:
        os.killpg(proc.pid, signal.SIGTERM)  # launcher and both ranks, as the runs app does
        assert proc.wait(timeout=60) == 3
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    final = json.loads(events.read_text().splitlines()[-1])
    assert final["state"] == "stopped" and final["exit_code"] == 3 and final["step"] % 2 == 0
    state = CheckpointStore.load(CheckpointStore(tmp_path / "run").latest())
    assert state["step"] == final["step"] and len(state["rng"]) == 2  # both ranks' RNG streams saved

    stopped_at = final["step"]
    cfg.epochs = stopped_at // 6 + 1  # 6 steps per epoch: finish the epoch after the stop
    cfg.save(tmp_path / "run.json")
    events.unlink()
    resumed = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer",
            "train",
            "--config",
            str(tmp_path / "run.json"),
            "--events",
            str(events),
            "--resume",
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
        timeout=120,
    )
    assert resumed.returncode == EXIT_DONE
    after = [json.loads(line) for line in events.read_text().splitlines()]
    steps = [e["step"] for e in after if e["type"] == "metrics"]
    assert steps == list(range(stopped_at + 1, cfg.epochs * 6 + 1))


def test_it_ends_a_two_process_run_with_the_config_error_when_its_weights_match_no_tensor(tmp_path, gray8):
    # Every rank loads the weights: none may train from scratch or wait for a rank that gave up.
    torch.save(torchvision.models.resnet18(weights=None).state_dict(), tmp_path / "resnet.pt")
    cfg = make_config(tmp_path / "run", gray8, devices="cpu x 2", epochs=1, pretrained=str(tmp_path / "resnet.pt"))
    reporter = ListReporter()
    assert train(cfg, reporter=reporter) == EXIT_CONFIG
    last = reporter.events[-1]
    assert last["state"] == "failed" and "resnet.pt matches none of the network's" in last["message"]
    assert not reporter.of_type("metrics")


def test_it_forks_each_ranks_loader_workers_even_where_ranks_are_spawned(tmp_path, gray8):
    # The launcher spawns the ranks, and a spawned process takes "spawn" as its default start
    # method: the loaders' workers then imported torch anew, seconds each and again at every
    # validation (6 steps of two ranks with two workers took 40 s instead of 2 here). Forked, as
    # in a one-process run and under torchrun; the workers never touch a GPU.
    from trainer.data import build_data
    from trainer.dataset_folder import load_dataset_folder
    from trainer.tasks import task_for

    cfg = make_config(tmp_path / "run", gray8, devices="cpu x 2", data={"num_workers": 2})
    info = load_dataset_folder(gray8)
    data = build_data(cfg, info, task=task_for(info.task), rank=1, world=2)
    for loader in (data.train_loader, data.val_loader):
        assert loader.multiprocessing_context.get_start_method() == "fork"
