"""Weights a run may start from: uploads kept under DATA_DIR/pretrained/, and copies of the
weights of a run's checkpoint. Users name them by reference (`upload:<id>`, `run:<id>`,
`run:<id>:last`), never by path; only the server turns a reference into a file (see
validators.resolve_pretrained for the rule of who may use what).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import IO

from django.conf import settings
from django.db import IntegrityError

from trainer import protocol
from trainer.weights_file import MAX_WEIGHTS_BYTES, WeightsFileError, read_state_dict, read_weights
from workbench.runs.models import PretrainedWeights, Run
from workbench.runs.selectors import runs_visible_to
from workbench.weights.models import StoredWeights

# The trainer's limit: one home for what a weights file may be (trainer/weights_file.py).
MAX_PRETRAINED_BYTES = MAX_WEIGHTS_BYTES
CHUNK = 1 << 20


class PretrainedError(ValueError):
    """An upload that is not a state_dict, or too large; the message names the file by its name."""


def pretrained_root() -> Path:
    return Path(settings.DATA_DIR) / "pretrained"


def _owner_folder(owner) -> Path:
    folder = pretrained_root() / f"user{owner.pk}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _relative(path: Path) -> str:
    return path.relative_to(settings.DATA_DIR).as_posix()


def inside_store(path: Path) -> bool:
    """Only regular files the server wrote under DATA_DIR/pretrained/ are ever given to a trainer."""
    root = pretrained_root().resolve()
    return not path.is_symlink() and path.resolve().is_relative_to(root) and path.is_file()


def state_dict_tensor_count(path: Path, *, name: str) -> int:
    """Tensors in the file's state_dict, by the trainer's one reader of weights files (safetensors
    or torch, format by content, the inflate limits, tensors only); PretrainedError otherwise."""
    try:
        return len(read_state_dict(path, name=name))
    except WeightsFileError as error:
        raise PretrainedError(str(error)) from None


def weights_upload(*, owner, name: str, chunks: IO[bytes] | object, size: int | None = None) -> PretrainedWeights:
    """Stores an uploaded file as `owner`'s weights, once checked to hold a state_dict.

    `chunks` is a Django UploadedFile (its .chunks()) or any binary file object. Written to a temp
    file in the same folder and renamed, so a half-written upload is never usable.
    """
    label = os.path.basename(str(name or "weights.pt"))[:200] or "weights.pt"
    if size is not None and size > MAX_PRETRAINED_BYTES:
        raise PretrainedError(f"{label} is {size} bytes, over the {MAX_PRETRAINED_BYTES} byte limit")
    folder = _owner_folder(owner)
    target = folder / f"upload-{uuid.uuid4().hex}.pt"
    tmp = target.with_suffix(".tmp")
    written = 0
    pieces = chunks.chunks() if hasattr(chunks, "chunks") else iter(lambda: chunks.read(CHUNK), b"")
    try:
        with tmp.open("wb") as handle:
            for piece in pieces:
                written += len(piece)
                if written > MAX_PRETRAINED_BYTES:
                    raise PretrainedError(f"{label} is over the {MAX_PRETRAINED_BYTES} byte limit")
                handle.write(piece)
        state_dict_tensor_count(tmp, name=label)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return PretrainedWeights.objects.create(owner=owner, name=label, path=_relative(target), size_bytes=written)


def checkpoint_of(run: Run, which: str) -> Path | None:
    """The run's best checkpoint (its latest when it has no best yet), or its latest for "last"."""
    if which == "last":
        return protocol.latest_checkpoint(run.run_dir)
    return protocol.best_checkpoint(run.run_dir) or protocol.latest_checkpoint(run.run_dir)


def checkpoint_epoch(run: Run, which: str) -> float | None:
    """The epoch of the checkpoint `checkpoint_of(run, which)` names, from the checkpoint index
    (no torch, no checkpoint read: the new-run form labels every run with it); None when the
    index does not say (a snapshot saved between validations)."""
    path = checkpoint_of(run, which)
    if path is None:
        return None
    index = protocol.read_index(run.run_dir)
    meta = index["best"] if path.name == protocol.BEST else index["snapshots"].get(path.name)
    epoch = (meta or {}).get("epoch")
    return float(epoch) if isinstance(epoch, int | float) else None


def weights_from_run(*, owner, run: Run, which: str) -> PretrainedWeights:
    """The weights of `run`'s checkpoint copied out for `owner` (a checkpoint is rotated and the
    run may be deleted; the copy stays). The same checkpoint file gives the same copy."""
    # torch only here: the forms and pages that import this module never pay for it.
    import torch  # torch: loaded only where this runs

    source = checkpoint_of(run, which)
    if source is None:
        raise PretrainedError(f"run #{run.pk} has no checkpoint yet")
    source = source.resolve()
    stamp = source.stat().st_mtime_ns
    target = _owner_folder(owner) / f"run{run.pk}-{which}-{source.stem}-{stamp}.pt"
    existing = PretrainedWeights.objects.filter(path=_relative(target)).first()
    if existing is not None and target.is_file():
        return existing
    try:
        # The one reader, as for every weights file; no byte limit: our trainer wrote it, and a
        # checkpoint's optimizer state may be larger than the weights themselves.
        weights = read_weights(source, name=f"run #{run.pk}'s checkpoint", max_bytes=None)
    except WeightsFileError:
        raise PretrainedError(f"run #{run.pk}'s checkpoint cannot be read") from None
    tmp = target.with_suffix(f".{uuid.uuid4().hex[:8]}.tmp")
    try:
        torch.save(weights.state, tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    try:
        return PretrainedWeights.objects.get_or_create(
            path=_relative(target),
            defaults={
                "owner": owner,
                "name": f"run #{run.pk} {which}"[:200],
                "size_bytes": target.stat().st_size,
                "source_run": run,
                "source_checkpoint": which,
                # The run page names the epoch fine-tuned from after the run's checkpoints rotate.
                "source_epoch": weights.epoch,
            },
        )[0]
    except IntegrityError:  # two submissions copied the same checkpoint at once
        return PretrainedWeights.objects.get(path=_relative(target))


def weights_for_path(path: str | None) -> PretrainedWeights | None:
    """The weights row a stored config's `pretrained` file was resolved from."""
    if not path:
        return None
    try:
        relative = _relative(Path(path))
    except ValueError:
        return None
    return PretrainedWeights.objects.select_related("source_run").filter(path=relative).first()


def reference_for_path(path: str | None) -> str | None:
    """A stored config's `pretrained` file as the reference it was resolved from (what users see)."""
    stored = StoredWeights.objects.filter(path=str(path)).first() if path else None
    if stored is not None:  # the weights store's (weights:<id>)
        return stored.reference
    weights = weights_for_path(path)
    return weights.reference if weights else None


def config_for_display(config: dict) -> dict:
    """The run's config with its `pretrained` file shown as its reference, never a server path."""
    if not config.get("pretrained"):
        return config
    return {**config, "pretrained": reference_for_path(config["pretrained"])}


def weights_source_for(user, run: Run) -> dict | None:
    """What `run` was fine-tuned from, as `user` may see it: a run's checkpoint (the run only when
    they may see it, and still there), the weights store's by network and label, or uploaded
    weights by the name they were uploaded as;
    None for a run trained from scratch. Never the file's path."""
    path = (run.config or {}).get("pretrained")
    stored = StoredWeights.objects.filter(path=str(path)).first() if path else None
    if stored is not None:  # the weights store's, shared by every user
        return {"kind": "stored", "name": f"{stored.network}, {stored.label}", "reference": stored.reference}
    weights = weights_for_path(path)
    if weights is None:
        return None
    if not weights.source_checkpoint:
        return {"kind": "upload", "name": weights.name}
    source = runs_visible_to(user).filter(pk=weights.source_run_id).first() if weights.source_run_id else None
    return {
        "kind": "run",
        "run": source,
        "epoch": weights.source_epoch,
        "checkpoint": "best" if weights.source_checkpoint == "best" else "latest snapshot",
    }
