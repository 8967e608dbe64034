"""What the store knows of a file without loading it: its hash, and the error every refusal raises.
Kept apart from checks.py, which needs torch, so that the web process and every manage.py command
start without importing torch (seconds each, and most never check a weights file)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from django.conf import settings


class WeightsError(ValueError):
    """A file or a name the store refuses; the message is the one line to show."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def resolves_inside(path: Path, root: Path) -> bool:
    """Whether `path` is a regular file whose real place (every link followed) is under `root`:
    a cache's link to the server's secret key, or to a user's file, is not the cache's file."""
    try:
        return path.is_file() and path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # a link loop
        return False


def cache_roots() -> list[Path]:
    """Where a filed file may really be: the store's folder, torchvision's and the hub's caches."""
    return [Path(settings.WEIGHTS_DIR), Path(settings.TORCH_HUB_CHECKPOINTS), Path(settings.HF_HUB_CACHE)]
