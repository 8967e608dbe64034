"""A failed run's log as its owner reads it (the events: run page, API, websocket, downloads) holds
the exception's type and message, never a traceback or a server path; the trainer's stderr (the run
folder's trainer.log) keeps the traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import lmdb

from tests.support.trainer_data import make_dataset_folder
from trainer import events
from trainer.events import error_summary
from trainer.protocol import EXIT_FAILED

from .conftest import make_config

REPO = Path(__file__).resolve().parents[2]


def _damage_last_record(db: Path) -> None:
    # prepare() reads the first record; the loop meets this one mid-epoch: an exception in training.
    with lmdb.open(str(db), subdir=True) as env, env.begin(write=True) as txn:
        key = list(txn.cursor().iternext(values=False))[-1]
        txn.put(key, b"\x08\x01\x10this is not a datum")


def test_it_shows_the_owner_the_error_and_keeps_the_traceback_on_the_server(tmp_path):
    dataset = make_dataset_folder(tmp_path / "ds", num_classes=2, size=8, channels=1, train=16, val=4)
    _damage_last_record(dataset / "train_db")
    cfg = make_config(tmp_path / "run", dataset, epochs=1, batch_size=4)
    cfg.save(tmp_path / "run.json")
    events, server_log = tmp_path / "events.jsonl", tmp_path / "trainer.log"
    with server_log.open("wb") as stderr:
        code = subprocess.run(
            [sys.executable, "-m", "trainer", "train", "--config", str(tmp_path / "run.json"), "--events", str(events)],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            cwd=tmp_path,
            stdout=stderr,
            stderr=stderr,
            timeout=300,
        ).returncode
    assert code == EXIT_FAILED
    shown = [json.loads(line) for line in events.read_text().splitlines()]
    text = "\n".join(str(event.get("line", "")) + str(event.get("message", "")) for event in shown)
    assert "DatumError" in text  # the owner learns what went wrong...
    assert "Traceback" not in text and 'File "' not in text  # ...without the traceback
    for server_path in {str(REPO), sys.prefix, os.path.dirname(os.__file__)}:
        assert server_path not in text
    assert shown[-1]["state"] == "failed" and shown[-1]["message"].startswith("DatumError: ")
    kept = server_log.read_text()
    assert "Traceback (most recent call last)" in kept and "DatumError" in kept


def test_it_cuts_absolute_paths_in_a_message_to_their_names():
    error = FileNotFoundError(2, "No such file or directory", "/srv/workbench/.venv/lib/site.py")
    assert error_summary(error) == "FileNotFoundError: [Errno 2] No such file or directory: 'site.py'"
    assert error_summary(ValueError("lr 1/2 of /data/runs/7/")) == "ValueError: lr 1/2 of (a folder)"
    assert error_summary(OSError("cannot open file:///srv/wb/runs/7/a.pt")) == "OSError: cannot open file:a.pt"


def test_it_cuts_a_server_folder_whose_name_has_a_space(monkeypatch):
    monkeypatch.setattr(events, "_WORKED_IN", set())
    events.hide_folders("/srv/lab data/runs/7", "/srv/lab data")
    error = FileNotFoundError(2, "No such file", "/srv/lab data/runs/7/best.pt")
    assert error_summary(error) == "FileNotFoundError: [Errno 2] No such file: 'best.pt'"
    assert error_summary(ValueError("data dir /srv/lab data is full")) == "ValueError: data dir (a folder) is full"
