"""The engine end to end on the CPU: it learns, resumes exactly, stops cleanly on SIGTERM, and
fails with clear messages (OOM, NaN); checkpoint writes are atomic."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import trainer.checkpoint as checkpoint_module
from tests.support.waiting import wait_until
from trainer.checkpoint import CheckpointStore
from trainer.engine import StopFlag
from trainer.events import ListReporter
from trainer.protocol import EXIT_DONE, EXIT_NONFINITE, EXIT_OOM, EXIT_STOPPED
from trainer.run import train
from trainer.tasks import classification

from .conftest import make_config

REPO = Path(__file__).resolve().parents[2]


def test_it_learns_real_digits_with_lenet(tmp_path, digits):
    cfg = make_config(
        tmp_path / "run",
        digits,
        epochs=4,
        batch_size=32,
        metrics_interval=20,
        solver={
            "optimizer": "sgd",
            "base_lr": 0.05,
            "momentum": 0.9,
            "lr_policy": "step",
            "step_size": 70.0,
            "gamma": 0.1,
        },
    )
    reporter = ListReporter()
    assert train(cfg, reporter=reporter) == EXIT_DONE
    validations = reporter.of_type("validation")
    assert [v["epoch"] for v in validations] == [1.0, 2.0, 3.0, 4.0]
    assert validations[-1]["top1"] >= 0.95, validations
    assert validations[-1]["top5"] >= 0.99  # 10 classes: top-5 is reported
    final = reporter.events[-1]
    assert final["type"] == "status" and final["state"] == "done" and final["exit_code"] == 0
    metrics = reporter.of_type("metrics")
    assert metrics[0]["loss"] > metrics[-1]["loss"]
    # Every 20 steps, and at each epoch's last step (the loss curve has a point per epoch, even
    # when an epoch is shorter than the interval).
    assert {m["epoch"] for m in metrics} >= {1.0, 2.0, 3.0, 4.0}
    assert len({m["step"] for m in metrics}) == len(metrics)  # an interval's step that ends an epoch: once
    assert any(m["step"] % 20 for m in metrics) and all(m["step"] % 20 == 0 or m["epoch"] % 1 == 0 for m in metrics)
    assert {
        "step",
        "epoch",
        "images_seen",
        "loss",
        "lr",
        "images_per_sec",
        "images_per_sec_per_process",
        "data_wait_share",
        "time",
    } <= set(metrics[0])
    last_progress = reporter.of_type("progress")[-1]
    assert (last_progress["percent"], last_progress["eta_seconds"]) == (100.0, 0.0)


class StopAfter(StopFlag):
    """Asks the run to stop after `steps` optimizer steps (what SIGTERM does, without a signal)."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.remaining = steps

    @property
    def requested(self) -> bool:  # the single-process loop asks once per step
        self.remaining -= 1
        return self.remaining <= 0

    @requested.setter
    def requested(self, value: bool) -> None:
        pass


def _resume_config(run_dir, dataset):
    # Dropout, random crops/flips, Adam, a step LR policy and an LR that changes mid-epoch:
    # every piece of state a resume must restore.
    layers = [
        {"type": "conv2d", "out_channels": 6, "kernel_size": 3, "padding": 1},
        {"type": "relu"},
        {"type": "dropout", "p": 0.3},
        {"type": "flatten"},
        {"type": "linear", "out_features": 16},
        {"type": "dropout", "p": 0.3},
        {"type": "linear"},
    ]
    return make_config(
        run_dir,
        dataset,
        network="custom",
        custom_layers=layers,
        epochs=3,
        metrics_interval=2,
        data={"crop_size": 6, "random_flip": True},
        snapshot_interval=1.0,
        solver={"optimizer": "adam", "base_lr": 0.01, "lr_policy": "step", "step_size": 40.0},
    )


def test_it_resumes_exactly_where_an_uninterrupted_run_would_be(tmp_path, gray8):
    full = ListReporter()
    assert train(_resume_config(tmp_path / "full", gray8), reporter=full) == EXIT_DONE

    first = ListReporter()
    code = train(_resume_config(tmp_path / "split", gray8), reporter=first, stop=StopAfter(7))  # mid-epoch 2
    assert code == EXIT_STOPPED
    stopped = first.events[-1]
    assert stopped["state"] == "stopped" and stopped["step"] == 7 and stopped["checkpoint_saved"]
    second = ListReporter()
    assert train(_resume_config(tmp_path / "split", gray8), reporter=second, resume=True) == EXIT_DONE
    assert second.of_type("status")[1]["resumed_from_step"] == 7

    def steps(events):
        return [(m["step"], round(m["loss"], 5), m["lr"]) for m in events.of_type("metrics")]

    assert steps(first) + steps(second) == steps(full)  # no repeats, no gaps, same values
    assert [v["step"] for v in first.of_type("validation") + second.of_type("validation")] == [6, 12, 18]
    a = CheckpointStore.load(CheckpointStore(tmp_path / "full").latest())
    b = CheckpointStore.load(CheckpointStore(tmp_path / "split").latest())
    assert a["step"] == b["step"] == 18
    for key in a["model"]:
        torch.testing.assert_close(a["model"][key], b["model"][key], rtol=0, atol=0)


@pytest.mark.parametrize("failure", ["torch.save", "os.replace"])
def test_it_never_makes_an_interrupted_checkpoint_write_the_latest(tmp_path, monkeypatch, failure):
    store = CheckpointStore(tmp_path, keep_last=3)
    store.save({"model": {"w": torch.ones(3)}}, step=10)

    def half_written(obj, fh):
        fh.write(b"PK\x03\x04 partial")
        raise OSError("disk full (simulated)")

    def replace_fails(src, dst):
        raise OSError("killed before rename (simulated)")

    if failure == "torch.save":
        monkeypatch.setattr(checkpoint_module.torch, "save", half_written)
    else:
        monkeypatch.setattr(checkpoint_module.os, "replace", replace_fails)
    with pytest.raises(OSError, match="simulated"):
        store.save({"model": {"w": torch.zeros(3)}}, step=20)
    monkeypatch.undo()
    assert store.latest().name == "step_00000010.pt"
    assert CheckpointStore.load(store.latest())["model"]["w"].tolist() == [1, 1, 1]
    assert [p.name for p in store.dir.iterdir() if p.name.endswith(".tmp")] == []
    assert list(json.loads((store.dir / "index.json").read_text())["snapshots"]) == ["step_00000010.pt"]


def test_it_keeps_the_last_k_and_the_best(tmp_path):
    store = CheckpointStore(tmp_path, keep_last=2)
    for step in (1, 2, 3, 4):
        store.save({"model": {"step": torch.tensor(step)}}, step=step, is_best=step == 2, metrics={"top1": step})
    assert [s for s, _ in store.snapshots()] == [3, 4]
    assert int(CheckpointStore.load(store.best())["model"]["step"]) == 2
    index = json.loads((store.dir / "index.json").read_text())
    assert index["best"]["step"] == 2 and sorted(index["snapshots"]) == ["step_00000003.pt", "step_00000004.pt"]


def test_it_reports_out_of_memory_with_batch_sizes_and_device_memory(tmp_path, gray8, monkeypatch):
    real_build = classification.build_model

    def build_then_oom(name, spec):
        model = real_build(name, spec)

        def hook(module, inputs):
            raise RuntimeError(
                "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: "
                "you tried to allocate 68719476736 bytes."
            )

        model.register_forward_pre_hook(hook)
        return model

    monkeypatch.setattr(classification, "build_model", build_then_oom)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "batch_size.json").write_text(json.dumps({"max_batch_size": 4}))
    reporter = ListReporter()
    assert train(make_config(tmp_path / "run", gray8, grad_accum=2), reporter=reporter) == EXIT_OOM
    final = reporter.events[-1]
    assert final["state"] == "failed" and final["exit_code"] == EXIT_OOM
    message = final["message"]
    assert "out of memory with global batch size 8 (8 per process x 1 process(es), 4 per micro-batch" in message
    assert "on cpu (" in message and "GiB RAM" in message and "network lenet" in message
    assert "The largest batch size that fits is 4" in message


def test_it_stops_on_a_non_finite_loss(tmp_path, gray8, monkeypatch):
    real_build = classification.build_model

    def build_poisoned(name, spec):
        model = real_build(name, spec)
        model.register_forward_hook(lambda module, inputs, output: output * float("nan"))
        return model

    monkeypatch.setattr(classification, "build_model", build_poisoned)
    reporter = ListReporter()
    assert train(make_config(tmp_path / "run", gray8), reporter=reporter) == EXIT_NONFINITE
    assert "training loss became nan by step 1" in reporter.events[-1]["message"]
    assert reporter.of_type("metrics") == []
    assert CheckpointStore(tmp_path / "run").latest() is None  # diverged weights are not saved


def _events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_it_saves_a_checkpoint_on_sigterm_and_resumes(tmp_path, gray8):
    # Two loader workers: they get the process group's SIGTERM too, and must not break the stop.
    cfg = make_config(tmp_path / "run", gray8, epochs=400, snapshot_interval=0, val_interval=0, data={"num_workers": 2})
    cfg.save(tmp_path / "run.json")
    events = tmp_path / "events.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "trainer", "train", "--config", str(tmp_path / "run.json"), "--events", str(events)]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, start_new_session=True)

    def trained_5_steps() -> bool:
        if any(e["type"] == "metrics" and e["step"] >= 5 for e in _events(events)):
            return True
        assert proc.poll() is None, f"the trainer exited ({proc.returncode}) before training"
        return False

    wait_until(trained_5_steps, what="training to start (metrics at step 5)", timeout=120, interval=0.1)
    os.killpg(proc.pid, signal.SIGTERM)  # what the runs app does to abort/pause
    assert proc.wait(timeout=60) == EXIT_STOPPED
    final = _events(events)[-1]
    assert final["type"] == "status" and final["state"] == "stopped" and final["exit_code"] == EXIT_STOPPED
    assert "stopped by SIGTERM" in final["message"] and final["message"].endswith("checkpoint saved")
    stopped_at = final["step"]
    assert CheckpointStore(tmp_path / "run").latest().name == f"step_{stopped_at:08d}.pt"

    cfg.epochs = stopped_at / 6 + 1  # 6 steps per epoch: one more epoch after the stop
    cfg.save(tmp_path / "run.json")
    events.unlink()
    result = subprocess.run([*cmd, "--resume"], env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == EXIT_DONE
    after = _events(events)
    steps = [e["step"] for e in after if e["type"] == "metrics"]
    assert steps[0] == stopped_at + 1 and steps == list(range(stopped_at + 1, steps[-1] + 1))
    assert after[-1]["state"] == "done"


def test_it_trains_from_a_bare_digits_job_folder(tmp_path):
    from tests.support.trainer_data import make_dataset_folder

    folder = make_dataset_folder(
        tmp_path / "digits_job", channels=3, encoding="jpg", train=16, val=4, digits_layout=True
    )
    assert not (folder / "dataset.json").exists()
    reporter = ListReporter()
    assert train(make_config(tmp_path / "run", folder, epochs=1), reporter=reporter) == EXIT_DONE
    state = CheckpointStore.load(CheckpointStore(tmp_path / "run").latest())
    assert state["mean"].shape == (3, 8, 8)  # from mean.binaryproto (BGR on disk, RGB here)
    assert state["preprocessing"]["resize_mode"] == "squash"
