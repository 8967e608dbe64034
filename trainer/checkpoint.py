"""Checkpoints in `<run_dir>/checkpoints/`: atomic, complete, last K kept plus the best.

The file layout (names, the index) is defined in trainer/protocol.py, which the web app reads
without torch. Files: `step_00001234.pt` (one per snapshot), `best.pt` (a hard link to the best snapshot's file,
so pruning old snapshots never loses it) and `index.json` (what exists, with metrics; for the web
app). A write goes to a temp file in the same folder, is fsynced, `os.replace`d into place and the
folder fsynced: a crash at any point leaves either the old set or the new one, never a torn file
under a final name. "Latest" is the highest step among complete files.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainer import protocol
from trainer.atomic import atomic_write, fsync_dir

FORMAT = "workbench-trainer-checkpoint"
VERSION = 1


def rng_state() -> dict[str, Any]:
    # numpy's state is stored as plain types + a tensor, so a checkpoint loads with
    # torch.load(weights_only=True): no pickled code runs when reading one (fine-tuning included).
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": [name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class CheckpointStore:
    def __init__(self, run_dir: str | os.PathLike[str], keep_last: int = 3) -> None:
        self.run_dir = Path(run_dir)
        self.dir = protocol.checkpoint_dir(run_dir)
        self.keep_last = keep_last

    def snapshots(self) -> list[tuple[int, Path]]:
        return protocol.snapshots(self.run_dir)

    def latest(self) -> Path | None:
        return protocol.latest_checkpoint(self.run_dir)

    def best(self) -> Path | None:
        return protocol.best_checkpoint(self.run_dir)

    def save(
        self, state: dict[str, Any], *, step: int, is_best: bool = False, metrics: dict[str, Any] | None = None
    ) -> Path:
        state = {"format": FORMAT, "version": VERSION, **state}
        path = self.dir / protocol.snapshot_name(step)
        atomic_write(path, lambda fh: torch.save(state, fh))
        if is_best:
            self._link_best(path)
        self._prune()
        self._write_index(step, metrics, is_best)
        return path

    def _link_best(self, path: Path) -> None:
        # A hard link shares the bytes (no second write) and survives pruning of step files.
        tmp = self.dir / f".best.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        try:
            os.link(path, tmp)
        except OSError:  # filesystems without hard links: copy instead
            atomic_write(tmp, lambda fh: fh.write(path.read_bytes()))
        os.replace(tmp, self.dir / protocol.BEST)
        fsync_dir(self.dir)

    def _prune(self) -> None:
        for _, old in self.snapshots()[: -self.keep_last]:
            with contextlib.suppress(FileNotFoundError):
                old.unlink()
        for stale in self.dir.glob(".*.tmp"):  # leftovers of writes killed mid-way
            with contextlib.suppress(FileNotFoundError):
                if stale.stat().st_mtime < _now() - 3600:
                    stale.unlink()

    def _write_index(self, step: int, metrics: dict[str, Any] | None, is_best: bool) -> None:
        index = protocol.read_index(self.run_dir)
        name = protocol.snapshot_name(step)
        index["snapshots"][name] = {"step": step, **(metrics or {})}
        present = {p.name for _, p in self.snapshots()}
        index["snapshots"] = {k: v for k, v in index["snapshots"].items() if k in present}
        if is_best:
            index["best"] = {"file": name, "step": step, **(metrics or {})}
        data = json.dumps(index, indent=1).encode()
        atomic_write(self.dir / protocol.INDEX, lambda fh: fh.write(data))

    @staticmethod
    def load(path: str | os.PathLike[str], map_location: str | torch.device = "cpu") -> dict[str, Any]:
        # weights_only: tensors, numbers, strings and containers only; a checkpoint file that
        # someone swapped for a pickle with code in it is refused instead of executed.
        state = torch.load(path, map_location=map_location, weights_only=True)
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise ValueError(f"{path}: not a trainer checkpoint")
        return state


def _now() -> float:
    return time.time()
