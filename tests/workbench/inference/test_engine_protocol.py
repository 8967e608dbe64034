"""The inference engine's child process speaks the trainer's protocol (trainer/protocol.py):
progress and a final status as JSON lines on stdout, the protocol's exit codes, the result in
result.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from trainer import protocol

pytestmark = [pytest.mark.slow]


def run_engine(tmp_path: Path, trained: dict, files: dict[str, bytes | np.ndarray]) -> tuple[int, list[dict]]:
    folder = tmp_path / "input"
    folder.mkdir()
    for name, content in files.items():
        if isinstance(content, bytes):
            (folder / name).write_bytes(content)
        else:
            Image.fromarray(content).save(folder / name)
    spec = {"kind": "classify", "checkpoint": str(protocol.best_checkpoint(trained["run_dir"])),
            "out": str(tmp_path / "out"), "input": str(folder)}  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run(
        [sys.executable, "-m", "workbench.inference.job", str(tmp_path / "spec.json")],
        capture_output=True,
        timeout=300,
    )
    return done.returncode, list(protocol.read_events(done.stdout.splitlines()))


def test_it_reports_progress_and_a_done_status_as_events(tmp_path, trained):
    digit = np.zeros((8, 8), dtype=np.uint8)
    code, events = run_engine(tmp_path, trained, {"a.png": digit, "b.png": digit + 100})
    assert code == protocol.EXIT_DONE, events
    progress = [e for e in events if e["type"] == protocol.PROGRESS]
    assert progress[-1]["done"] == progress[-1]["total"] == 2 and progress[-1]["percent"] == 100.0
    final = events[-1]
    assert final["type"] == protocol.STATUS and final["state"] == protocol.DONE
    assert final["exit_code"] == protocol.EXIT_DONE
    assert json.loads((tmp_path / "out" / "result.json").read_text())["count"] == 2


def test_it_ends_an_unusable_input_with_a_failed_status_and_the_config_exit_code(tmp_path, trained):
    code, events = run_engine(tmp_path, trained, {"notes.txt": b"not an image"})
    assert code == protocol.EXIT_CONFIG
    final = events[-1]
    assert final["type"] == protocol.STATUS and final["state"] == protocol.FAILED
    assert final["exit_code"] == protocol.EXIT_CONFIG and final["message"].startswith("none of the 1 files is an image")
    assert not (tmp_path / "out" / "result.json").exists()
