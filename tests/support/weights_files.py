"""Weights files the doors must take or refuse alike: a state_dict as safetensors, and a torch.save
file carrying a zip bomb hidden behind a stored record (padding that lowers the file's overall
ratio, which a total-only check judged)."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import torch
from safetensors.torch import save_file

BOMB_BYTES = 64 * 1024**2  # inflated; deflated to about 64 KB. Small: the test only reads the directory.


def save_safetensors(state: dict, path: Path) -> Path:
    save_file({name: tensor.contiguous() for name, tensor in state.items()}, str(path))
    return path


def padded_bomb(state: dict, path: Path, *, padding: int = 1024**2, bomb_bytes: int = BOMB_BYTES) -> Path:
    """`state` saved by torch.save, then two more records: `padding` random bytes stored (ratio 1)
    and `bomb_bytes` of zeros deflated (ratio about 1000; bench/bench_hostile_memory.py makes the
    issue's 1 GB one). The file's overall ratio stays under the 100 of the old total-only check;
    the bomb record alone is far over any ratio."""
    torch.save(state, path)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(zipfile.ZipInfo("archive/data/padding"), os.urandom(padding))
        info = zipfile.ZipInfo("archive/data/bomb")
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w", force_zip64=True) as record:
            zeros = bytes(1 << 22)
            for _ in range(bomb_bytes // len(zeros)):
                record.write(zeros)
    return path
