"""Weights users upload to start runs from, kept under DATA_DIR/pretrained/user<id>/: the upload
service, and this app's two schemes of the reference grammar (`weights:` the store's, `upload:`
one's own), registered with references.py below. Every refusal of a file is a WeightsError whose
one line names the file by its name."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import IO

from django.conf import settings

from trainer.weights_file import MAX_WEIGHTS_BYTES
from workbench.weights import references
from workbench.weights.files import WeightsError
from workbench.weights.models import StoredWeights, UploadedWeights
from workbench.weights.references import Reference, WeightsReferenceError
from workbench.weights.selectors import weights_usable
from workbench.workers.processes import start_child

log = logging.getLogger(__name__)

# The trainer's limit: one home for what a weights file may be (trainer/weights_file.py).
MAX_UPLOAD_BYTES = MAX_WEIGHTS_BYTES
CHUNK = 1 << 20
# How long the child that reads an upload may take: a 2 GiB file loads in seconds on a quiet host.
CHECK_SECONDS = 600


def uploads_root() -> Path:
    return Path(settings.DATA_DIR) / "pretrained"


def _owner_folder(owner) -> Path:
    folder = uploads_root() / f"user{owner.pk}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def inside_uploads(path: Path) -> bool:
    """Only regular files the server wrote under DATA_DIR/pretrained/ are ever given to a trainer."""
    root = uploads_root().resolve()
    return not path.is_symlink() and path.resolve().is_relative_to(root) and path.is_file()


def weights_upload(*, owner, name: str, chunks: IO[bytes] | object, size: int | None = None) -> UploadedWeights:
    """Stores an uploaded file as `owner`'s weights, once the trainer's one reader of weights files
    (safetensors or torch, format by content, the inflate limits, tensors only) takes it.

    `chunks` is a Django UploadedFile (its .chunks()) or any binary file object. Written to a temp
    file in the same folder and renamed, so a half-written upload is never usable.
    """
    label = os.path.basename(str(name or "weights.pt"))[:200] or "weights.pt"
    if size is not None and size > MAX_UPLOAD_BYTES:
        raise WeightsError(f"{label} is {size} bytes, over the {MAX_UPLOAD_BYTES} byte limit")
    folder = _owner_folder(owner)
    target = folder / f"upload-{uuid.uuid4().hex}.pt"
    tmp = target.with_suffix(".tmp")
    written = 0
    pieces = chunks.chunks() if hasattr(chunks, "chunks") else iter(lambda: chunks.read(CHUNK), b"")
    try:
        with tmp.open("wb") as handle:
            for piece in pieces:
                written += len(piece)
                if written > MAX_UPLOAD_BYTES:
                    raise WeightsError(f"{label} is over the {MAX_UPLOAD_BYTES} byte limit")
                handle.write(piece)
        check_in_child(tmp, name=label)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    relative = target.relative_to(settings.DATA_DIR).as_posix()
    return UploadedWeights.objects.create(owner=owner, name=label, path=relative, size_bytes=written)


def check_in_child(path: Path, *, name: str) -> None:
    """The trainer's one reader of weights files takes `path`, or WeightsError with its refusal.
    It runs in a child (`python -m trainer.weights_file`): a valid upload's tensors, up to 2 GiB,
    are loaded there and freed when it ends, not into the web process that serves every user."""
    with tempfile.TemporaryFile() as out:
        child = start_child([sys.executable, "-m", "trainer.weights_file", str(path), name], stdout=out)
        try:
            child.wait(timeout=CHECK_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise WeightsError(f"{name} took more than {CHECK_SECONDS} s to read") from None
        out.seek(0)
        said = out.read(64 << 10).decode("utf-8", "replace").strip().splitlines()
    if child.returncode == 2 and said:
        raise WeightsError(said[-1])  # the reader's one line, naming the file by `name`
    if child.returncode != 0:
        log.error("the weights reader failed on an upload (exit %s):\n%s", child.returncode, "\n".join(said[-40:]))
        raise WeightsError(f"{name} could not be read: an internal error, written to the server's log")


class StoreScheme:
    """`weights:<id>`: the store's, shared by every user, for the network they were filed for."""

    name = "weights"

    def _row(self, reference: Reference) -> StoredWeights:
        stored = weights_usable().filter(pk=reference.pk).first()
        if stored is None or not stored.present:
            raise WeightsReferenceError()
        return stored

    def check(self, reference: Reference, *, owner, network: str) -> None:
        stored = self._row(reference)
        if stored.network != network:
            raise WeightsReferenceError(
                f"{stored.reference} are {stored.network} weights; choose network {stored.network} to start from them"
            )

    def path(self, reference: Reference, *, owner, run_dir: Path) -> Path:
        return self._row(reference).file

    def describe(self, reference: Reference, *, viewer, run_dir: Path) -> dict | None:
        stored = StoredWeights.objects.filter(pk=reference.pk).first()
        if stored is None:
            return None
        return {"kind": "stored", "name": f"{stored.network}, {stored.label}", "reference": stored.reference}

    def preprocessing(self, reference: Reference) -> dict:
        stored = weights_usable().filter(pk=reference.pk).first()
        return stored.preprocessing() if stored else {}


class UploadScheme:
    """`upload:<id>`: an upload of the user's own (staff: anyone's), whose file is still the server's."""

    name = "upload"

    def _row(self, reference: Reference, owner) -> UploadedWeights:
        weights = UploadedWeights.objects.visible_to(owner).filter(pk=reference.pk).first()
        if weights is None or not inside_uploads(weights.file):
            raise WeightsReferenceError()
        return weights

    def check(self, reference: Reference, *, owner, network: str) -> None:
        self._row(reference, owner)  # whether they fit the network: the trainer says at launch

    def path(self, reference: Reference, *, owner, run_dir: Path) -> Path:
        return self._row(reference, owner).file

    def describe(self, reference: Reference, *, viewer, run_dir: Path) -> dict | None:
        weights = UploadedWeights.objects.filter(pk=reference.pk).first()
        if weights is None:
            return {"kind": "upload", "name": f"upload #{reference.pk} (deleted)"}
        # The name is the uploader's: a project member who sees the run may not see the upload.
        name = weights.name if weights.is_visible_to(viewer) else f"upload #{reference.pk}"
        return {"kind": "upload", "name": name}

    def preprocessing(self, reference: Reference) -> dict:
        return {}


references.register(StoreScheme())
references.register(UploadScheme())
