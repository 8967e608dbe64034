"""What the store knows of a file without loading it: its hash, and the error every refusal raises.
Kept apart from checks.py, which needs torch, so that the web process and every manage.py command
start without importing torch (seconds each, and most never check a weights file)."""

from __future__ import annotations

import hashlib
from pathlib import Path


class WeightsError(ValueError):
    """A file or a name the store refuses; the message is the one line to show."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
