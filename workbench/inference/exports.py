"""Model exports (bundle, TorchScript, ONNX) of a run's checkpoints, as cached zips.

An export takes seconds to a minute of CPU (tracing, ONNX export, checks with onnxruntime and on
the dataset), so it is built by a worker, never in a web request: asking for a zip that is not
built yet queues its build once and answers "building"; the caller asks again until it is there.

Beside the zip, `<zip>.state` (JSON, always replaced whole) says where its build is: `queued`,
`taken` by a worker process (hostname and boot id), or `failed` with the reason (answered once:
asking again builds again). A build whose worker is lost is queued again at the next request; one
that lost its worker twice fails (it may need more memory than the worker has).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
import time
import uuid
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

from celery import current_app
from django.db import transaction

from trainer.atomic import atomic_write
from workbench.core.task_table import task_row
from workbench.inference import networks
from workbench.inference.services import InferenceError, checkpoint_path
from workbench.runs.models import Run
from workbench.workers.inventory import lost_worker
from workbench.workers.models import WorkerHost

log = logging.getLogger(__name__)

EXPORT_FORMATS = ("bundle", "torchscript", "onnx")
# A queued build that no worker has taken after this long is queued again (its message was lost).
# A build a worker took is queued again as soon as that worker is lost (heartbeats, restart).
EXPORT_STALE_SECONDS = 15 * 60
# Builds whose worker died this many times fail instead of taking down yet another worker.
EXPORT_MAX_LOST = 2

_export_locks: dict[str, threading.Lock] = {}
_export_locks_guard = threading.Lock()


@dataclass(frozen=True)
class ExportState:
    state: str  # ready | building | failed
    path: Path  # the zip; exists when ready
    error: str = ""  # when failed: what went wrong with `field` (InferenceError's pair)
    field: str | None = "format"


def export_request(*, run: Run, fmt: str, checkpoint: str = "best") -> ExportState:
    """The export's zip when it is built; otherwise its build is queued on a worker (once, or
    again when the last try was lost) and the state says so. InferenceError names a bad field."""
    _, target = _export_paths(run=run, fmt=fmt, checkpoint=checkpoint)
    # Said before anything is queued: a format the network cannot be exported to (the page says so too).
    note = networks.export_notes(run=run).get(fmt, {})
    if note.get("available") is False:
        raise InferenceError("format", note["note"])
    if target.exists():
        return ExportState("ready", target)
    state_path = _state_path(target)
    state = _read_state(state_path)
    if state.get("state") == "failed":
        state_path.unlink(missing_ok=True)
        error = state.get("error") or f"the {fmt} export failed"
        return ExportState("failed", target, error, state.get("field", "format"))
    why = _lost(state, state_path)
    if why is None:
        return ExportState("building", target)
    lost = int(state.get("lost", 0)) + (state.get("state") == "taken")
    if lost >= EXPORT_MAX_LOST:
        state_path.unlink(missing_ok=True)
        error = f"the {fmt} export was interrupted {lost} times ({why}); it may need more memory than the worker has"
        return ExportState("failed", target, error)
    _write_state(state_path, {"state": "queued", "checkpoint": checkpoint, "lost": lost, "at": time.time()})
    transaction.on_commit(lambda: _queue(run.pk, fmt, checkpoint))
    return ExportState("building", target)


def _lost(state: dict, state_path: Path) -> str | None:
    """Why no build is on its way (never queued, its worker lost, nobody took it), or None."""
    if not state:
        return "not queued" if not state_path.exists() else "its state was unreadable"
    if state.get("state") == "taken":
        try:
            boot_id = uuid.UUID(str(state.get("boot_id")))
        except ValueError:
            return "its worker is unknown"
        host = WorkerHost.objects.filter(hostname=state.get("worker", "")).first()
        return lost_worker(host, boot_id) or None
    try:
        age = time.time() - state_path.stat().st_mtime
    except FileNotFoundError:
        return "not queued"
    return "no worker took it" if age > EXPORT_STALE_SECONDS else None


def _state_path(target: Path) -> Path:
    return target.with_name(f"{target.name}.state")


def _read_state(path: Path) -> dict:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _write_state(path: Path, state: dict) -> None:
    """Replaces the state whole, so a reader sees the old one or the new one, never half."""
    atomic_write(path, lambda handle: handle.write(json.dumps(state).encode("utf-8")))


def _queue(run_id: int, fmt: str, checkpoint: str) -> None:
    # By the task's name (tasks.build_export): the tasks module imports this one.
    current_app.send_task("workbench.inference.tasks.build_export", args=[run_id, fmt, checkpoint])


def export_build(*, run_id: int, fmt: str, checkpoint: str, worker: str = "", boot_id: uuid.UUID | None = None) -> str:
    """The worker's side of export_request: builds the zip, or leaves the reason it failed.
    `worker` and `boot_id` name the Celery worker process building it (see _lost)."""
    run = Run.objects.select_related("dataset").filter(pk=run_id).first()
    if run is None:
        return "gone"
    try:
        _, target = _export_paths(run=run, fmt=fmt, checkpoint=checkpoint)
    except (InferenceError, OSError):
        return "gone"  # the checkpoint was deleted since: the next request says so
    state_path = _state_path(target)
    lost = int(_read_state(state_path).get("lost", 0))
    if worker and boot_id:
        _write_state(state_path, {"state": "taken", "worker": worker, "boot_id": str(boot_id), "lost": lost})
    try:
        export_zip(run=run, fmt=fmt, checkpoint=checkpoint)
    except Exception as error:
        # Whatever it was, the asker must hear it (not wait, nor queue the same failure forever).
        if not isinstance(error, InferenceError):
            log.exception("run %s: the %s export of %s failed", run_id, fmt, checkpoint)
            error = InferenceError("format", f"the {fmt} export failed: {type(error).__name__}: {error}")
        _write_state(state_path, {"state": "failed", "field": error.field, "error": error.message})
        return "failed"
    state_path.unlink(missing_ok=True)  # after the zip is in place: a reader sees one or the other
    return "ready"


CHECK_IMAGES = 64


def _check_on_dataset(*, run: Run, checkpoint: Path, folder: Path, fmt: str) -> dict | None:
    """Run the exported model on up to CHECK_IMAGES images of the run's validation (or test)
    split and compare its top-1 with the PyTorch checkpoint's; refuses the export on a mismatch."""
    # torch (with the trainer) is loaded only where this runs, never by every web process
    import numpy as np  # torch: loaded only where this runs
    import torch  # torch: loaded only where this runs

    from trainer.data import LMDBImageDataset  # torch: loaded only where this runs
    from trainer.dataset_folder import DatasetFolderError, load_dataset_folder  # torch: loaded only where this runs
    from trainer.export import judged  # torch: loaded only where this runs
    from trainer.inference import load_checkpoint_classifier  # torch: loaded only where this runs
    from trainer.versions import open_images  # torch: loaded only where this runs

    if fmt == "bundle":
        return None
    try:
        info = load_dataset_folder(run.dataset_folder)
    except (DatasetFolderError, OSError):
        return None  # the dataset was deleted: the random-input check of the export still holds
    split = next((name for name in ("val", "test", "train") if name in info.splits), None)
    if split is None:
        return None
    classifier = load_checkpoint_classifier(checkpoint)
    db = open_images(info.splits[split])
    try:
        images = LMDBImageDataset(db, crop_size=classifier.preprocessing.get("crop"))
        count = min(CHECK_IMAGES, len(images))
        batch = classifier.normalize(torch.stack([images[i][0] for i in range(count)]))
    finally:
        db.close()
    with torch.no_grad():
        want = classifier.model(batch).argmax(1).numpy()
    if fmt == "onnx":
        # onnxruntime is large and needed only to check an ONNX export
        import onnxruntime as ort  # large: only to check an export

        session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
        got = session.run(None, {"input": batch.numpy()})[0].argmax(1)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # jit is deprecated; the format is still the portable one
            scripted = torch.jit.load(str(folder / "model.torchscript.pt"))
        with torch.no_grad():
            got = scripted(batch).argmax(1).numpy()
    same = int(np.sum(got == want))
    if same != count:
        raise InferenceError(
            "format", f"the {fmt} model disagrees with PyTorch on {count - same} of {count} {split} images"
        )
    return judged({"split": split, "images": count, "compared": count, "same_top1": same})


TASK_CHECK_IMAGES = 8  # a detector takes one image at a time in ONNX: a few are enough


def _dataset_images(run: Run):
    """Up to TASK_CHECK_IMAGES uint8 images of the run's validation (or test, train) split, for a
    detector's or segmentation network's export check; None when the dataset is gone."""
    # torch (with the trainer) is loaded only where this runs, never by every web process
    import numpy as np  # torch: loaded only where this runs

    from trainer.dataset_folder import DatasetFolderError, load_dataset_folder  # torch: loaded only where this runs
    from trainer.versions import open_images  # torch: loaded only where this runs

    try:
        info = load_dataset_folder(run.dataset_folder)
    except (DatasetFolderError, OSError):
        return None  # the dataset was deleted: the export is checked on random images
    split = next((name for name in ("val", "test", "train") if name in info.splits), None)
    if split is None:
        return None
    db = open_images(info.splits[split])
    try:
        return np.stack([db[i][0] for i in range(min(TASK_CHECK_IMAGES, len(db)))])
    finally:
        db.close()


def export_check(path: Path) -> dict | None:
    """The comparison with PyTorch on the dataset's images that a built export passed (its
    export.json's `dataset_check`), for the download page to state; None for a bundle."""
    try:
        with zipfile.ZipFile(path) as archive:
            name = next((n for n in archive.namelist() if n.endswith("/export.json")), None)
            return json.loads(archive.read(name)).get("dataset_check") if name else None
    except (OSError, ValueError, zipfile.BadZipFile):
        return None  # the zip is still offered; only the statement is left out


def _export_paths(*, run: Run, fmt: str, checkpoint: str) -> tuple[Path, Path]:
    """The checkpoint file and the zip its export is cached in (named after the file and its
    modification time, so a rewritten checkpoint gets a new export)."""
    if fmt not in EXPORT_FORMATS:
        raise InferenceError("format", f"{fmt!r} is not one of {', '.join(EXPORT_FORMATS)}")
    source = checkpoint_path(run=run, which=checkpoint)
    tag = f"{source.resolve().stem}-{int(source.stat().st_mtime_ns)}"
    return source, run.run_dir / "exports" / f"run{run.pk}-{tag}-{fmt}.zip"


def export_zip(*, run: Run, fmt: str, checkpoint: str = "best") -> Path:
    """A zip of the bundle (weights, labels, preprocessing, config, README) plus the TorchScript
    or ONNX model, built here (in a worker: see export_request); cached per checkpoint file and
    format. ONNX is checked with onnxruntime, and both models against PyTorch on the dataset."""
    source, target = _export_paths(run=run, fmt=fmt, checkpoint=checkpoint)
    real = source.resolve()
    with _export_locks_guard:
        lock = _export_locks.setdefault(str(target), threading.Lock())
    with lock:
        if target.exists():
            return target
        # torch (with the trainer) is loaded only where this runs, never by every web process
        from trainer.export import export_run  # torch: loaded only where this runs

        target.parent.mkdir(parents=True, exist_ok=True)
        formats = ("bundle",) if fmt == "bundle" else ("bundle", fmt)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            folder = Path(tmp) / f"run{run.pk}-{fmt}"
            try:
                if task_row(run.dataset.task).export_checked_while_made:
                    report = export_run(source, folder, formats, _dataset_images(run))
                    check = report.get("onnx_check") or report.get("torchscript_check")
                else:  # compared after, top-1 over the dataset's images
                    report = export_run(source, folder, formats)
                    check = _check_on_dataset(run=run, checkpoint=source, folder=folder, fmt=fmt)
            except (RuntimeError, ValueError) as error:
                raise InferenceError("format", f"the {fmt} export failed: {error}") from None
            (folder / "export.json").write_text(
                json.dumps(
                    {
                        "run": run.pk,
                        "name": run.name,
                        "network": run.network,
                        "checkpoint": source.name,
                        "format": fmt,
                        "onnx_check": report.get("onnx_check"),
                        "dataset_check": check,
                    },
                    indent=2,
                ),
                encoding="utf-8",
            )
            partial = Path(tmp) / "export.zip"
            with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
                for path in sorted(folder.rglob("*")):
                    if path.is_file():
                        archive.write(path, f"{folder.name}/{path.relative_to(folder).as_posix()}")
            os.replace(partial, target)
        # Older exports of this checkpoint file (it was rewritten), and their build states.
        for stale in target.parent.glob(f"run{run.pk}-*-{fmt}.zip*"):
            if stale.name.split("-")[1] == real.stem and stale not in (target, _state_path(target)):
                with contextlib.suppress(OSError):
                    stale.unlink()
    return target
