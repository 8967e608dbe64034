"""trainer/protocol.py: the contracts read across the process boundary, importable without torch,
and the one spelling of the checkpoint layout that the trainer writes and the web app reads."""

from __future__ import annotations

import json
import subprocess
import sys

import torch

from trainer import protocol
from trainer.checkpoint import CheckpointStore
from trainer.events import Events, ListReporter


def test_it_imports_the_protocol_and_the_event_writers_without_torch():
    # A fresh interpreter: this one has torch loaded already.
    probe = (
        "import sys, trainer.protocol, trainer.events; "
        "print([m for m in ('torch', 'numpy', 'django') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.replace("'", '"')) == []


def test_it_reads_json_lines_and_keeps_a_stray_line_as_a_warning():
    lines = [b'{"type": "progress", "percent": 50}\n', b"\n", b"a library printed this\n", '{"type":"status"}']
    events = list(protocol.read_events(lines))
    assert events == [
        {"type": "progress", "percent": 50},
        {"type": "log", "line": "a library printed this", "level": "warning"},
        {"type": "status"},
    ]
    assert protocol.final_status(events) == {"type": "status"}
    assert protocol.final_status(events[:2], {"type": "status", "state": "running"})["state"] == "running"


def test_it_gives_every_final_outcome_a_status_with_its_exit_code():
    assert protocol.Outcome.done("ok", step=3).status_fields() == {
        "state": "done", "message": "ok", "exit_code": protocol.EXIT_DONE, "step": 3,
    }  # fmt: skip
    stopped = protocol.Outcome.stopped("stopped", step=2)
    assert (stopped.code, stopped.state) == (protocol.EXIT_STOPPED, protocol.STOPPED)
    assert protocol.EXIT_OK == (protocol.EXIT_DONE, protocol.EXIT_STOPPED)
    assert not set(protocol.FAILURE_REASONS) & set(protocol.EXIT_OK)
    assert set(protocol.FINAL_STATES) <= set(protocol.STATES)


def test_it_emits_the_fields_the_protocol_names_for_each_event_type():
    reporter = ListReporter()
    events = Events(reporter)
    events.status(protocol.RUNNING, "training")
    events.log("a line")
    events.progress(10.0, None, 1.0, step=1)
    for event in reporter.events:
        assert event["type"] in protocol.EVENT_TYPES
        assert set(protocol.EVENT_FIELDS[event["type"]]) <= set(event), event


def test_it_finds_the_checkpoints_the_store_writes_by_the_protocols_layout(tmp_path):
    store = CheckpointStore(tmp_path, keep_last=2)
    for step, best in ((10, True), (20, False), (30, False)):
        store.save({"model": {"w": torch.zeros(1)}}, step=step, is_best=best, metrics={"top1": step / 100})
    folder = protocol.checkpoint_dir(tmp_path)
    assert store.dir == folder
    assert [step for step, _ in protocol.snapshots(tmp_path)] == [20, 30]
    assert protocol.latest_checkpoint(tmp_path) == folder / protocol.snapshot_name(30) == folder / "step_00000030.pt"
    assert protocol.best_checkpoint(tmp_path) == folder / protocol.BEST
    index = protocol.read_index(tmp_path)
    assert list(index["snapshots"]) == ["step_00000020.pt", "step_00000030.pt"]
    assert index["best"]["file"] == protocol.snapshot_name(10)
    assert protocol.snapshot_step("step_00000030.pt") == 30 and protocol.snapshot_step("best.pt") is None
    assert protocol.read_index(tmp_path / "nothing") == {"snapshots": {}, "best": None}
