"""Model exports (bundle, TorchScript, ONNX) of a run's checkpoints, as cached zips.

An export takes seconds to a minute of CPU (tracing, ONNX export, checks with onnxruntime and on
the dataset), so it is built by a worker, never in a web request: asking for a zip that is not
built yet queues its build once and answers "building"; the caller asks again until it is there.
Beside the zip, `<zip>.queued` marks a build on its way (and, once a worker took it, which worker
process: a build whose worker is lost is queued again at the next request) and `<zip>.failed`
holds why the last build failed (read once: asking again builds again).
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

from django.db import transaction

from workbench.inference.services import InferenceError, checkpoint_path
from workbench.runs.inventory import lost_worker
from workbench.runs.models import Run, WorkerHost

log = logging.getLogger(__name__)

EXPORT_FORMATS = ("bundle", "torchscript", "onnx")
# A queued build that no worker has taken after this long is queued again (its message was lost).
# A build a worker took is queued again as soon as that worker is lost (heartbeats, restart).
EXPORT_STALE_SECONDS = 15 * 60

_export_locks: dict[str, threading.Lock] = {}
_export_locks_guard = threading.Lock()


@dataclass(frozen=True)
class ExportState:
    state: str  # ready | building | failed
    path: Path  # the zip; exists when ready
    error: str = ""


def export_request(*, run: Run, fmt: str, checkpoint: str = "best") -> ExportState:
    """The export's zip when it is built; otherwise its build is queued on a worker (once, or
    again when the last try was lost) and the state says so. InferenceError names a bad field."""
    _, target = _export_paths(run=run, fmt=fmt, checkpoint=checkpoint)
    if target.exists():
        return ExportState("ready", target)
    failed, queued = _markers(target)
    try:
        error = failed.read_text(encoding="utf-8")
    except FileNotFoundError:
        pass
    else:
        failed.unlink(missing_ok=True)
        return ExportState("failed", target, error)
    if _build_lost(queued):
        queued.parent.mkdir(parents=True, exist_ok=True)
        queued.write_text(json.dumps({"checkpoint": checkpoint, "queued_at": time.time()}), encoding="utf-8")
        transaction.on_commit(lambda: _queue(run.pk, fmt, checkpoint))
    return ExportState("building", target)


def _build_lost(queued: Path) -> bool:
    """Whether no build is on its way: never queued, its worker is lost, or nobody took it."""
    try:
        age = time.time() - queued.stat().st_mtime
        taken = json.loads(queued.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return True
    except ValueError:
        taken = {}  # being rewritten by the worker taking it: judged by its age
    if taken.get("worker") and taken.get("boot_id"):
        host = WorkerHost.objects.filter(hostname=taken["worker"]).first()
        return bool(lost_worker(host, uuid.UUID(taken["boot_id"])))
    return age > EXPORT_STALE_SECONDS


def _markers(target: Path) -> tuple[Path, Path]:
    return target.with_name(f"{target.name}.failed"), target.with_name(f"{target.name}.queued")


def _queue(run_id: int, fmt: str, checkpoint: str) -> None:
    from workbench.inference.tasks import build_export

    build_export.delay(run_id, fmt, checkpoint)


def export_build(*, run_id: int, fmt: str, checkpoint: str, worker: str = "", boot_id: uuid.UUID | None = None) -> str:
    """The worker's side of export_request: builds the zip, or leaves the reason it failed.
    `worker` and `boot_id` name the Celery worker process building it (see _build_lost)."""
    run = Run.objects.select_related("dataset").filter(pk=run_id).first()
    if run is None:
        return "gone"
    try:
        _, target = _export_paths(run=run, fmt=fmt, checkpoint=checkpoint)
    except (InferenceError, OSError):
        return "gone"  # the checkpoint was deleted since: the next request says so
    failed, queued = _markers(target)
    if worker and boot_id:
        taken = {"checkpoint": checkpoint, "worker": worker, "boot_id": str(boot_id), "taken_at": time.time()}
        queued.parent.mkdir(parents=True, exist_ok=True)
        queued.write_text(json.dumps(taken), encoding="utf-8")
    try:
        export_zip(run=run, fmt=fmt, checkpoint=checkpoint)
    except Exception as error:
        # Whatever it was, the asker must hear it (not wait, nor queue the same failure forever).
        if not isinstance(error, InferenceError):
            log.exception("run %s: the %s export of %s failed", run_id, fmt, checkpoint)
            error = InferenceError(f"format: the {fmt} export failed: {type(error).__name__}: {error}")
        failed.parent.mkdir(parents=True, exist_ok=True)
        failed.write_text(str(error), encoding="utf-8")
        return "failed"
    finally:
        queued.unlink(missing_ok=True)
    return "ready"


CHECK_IMAGES = 64


def _check_on_dataset(*, run: Run, checkpoint: Path, folder: Path, fmt: str) -> dict | None:
    """Run the exported model on up to CHECK_IMAGES images of the run's validation (or test)
    split and compare its top-1 with the PyTorch checkpoint's; refuses the export on a mismatch."""
    import numpy as np
    import torch

    from trainer.data import LMDBImageDataset
    from trainer.dataset_folder import DatasetFolderError, load_dataset_folder
    from trainer.datum import DatumLMDB
    from trainer.inference import load_checkpoint_classifier

    if fmt == "bundle":
        return None
    try:
        info = load_dataset_folder(run.dataset.path)
    except (DatasetFolderError, OSError):
        return None  # the dataset was deleted: the random-input check of the export still holds
    split = next((name for name in ("val", "test", "train") if name in info.splits), None)
    if split is None:
        return None
    classifier = load_checkpoint_classifier(checkpoint)
    db = DatumLMDB(info.splits[split].db)
    try:
        images = LMDBImageDataset(db, crop_size=classifier.preprocessing.get("crop"))
        count = min(CHECK_IMAGES, len(images))
        batch = classifier.normalize(torch.stack([images[i][0] for i in range(count)]))
    finally:
        db.close()
    with torch.no_grad():
        want = classifier.model(batch).argmax(1).numpy()
    if fmt == "onnx":
        import onnxruntime as ort

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
            f"format: the {fmt} model disagrees with PyTorch on {count - same} of {count} {split} images"
        )
    return {"split": split, "images": count, "same_top1": same}


def _export_paths(*, run: Run, fmt: str, checkpoint: str) -> tuple[Path, Path]:
    """The checkpoint file and the zip its export is cached in (named after the file and its
    modification time, so a rewritten checkpoint gets a new export)."""
    if fmt not in EXPORT_FORMATS:
        raise InferenceError(f"format: {fmt!r} is not one of {', '.join(EXPORT_FORMATS)}")
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
        from trainer.export import export_run

        target.parent.mkdir(parents=True, exist_ok=True)
        formats = ("bundle",) if fmt == "bundle" else ("bundle", fmt)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            folder = Path(tmp) / f"run{run.pk}-{fmt}"
            try:
                report = export_run(source, folder, formats)
            except (RuntimeError, ValueError) as error:
                raise InferenceError(f"format: the {fmt} export failed: {error}") from None
            check = _check_on_dataset(run=run, checkpoint=source, folder=folder, fmt=fmt)
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
        for stale in target.parent.glob(f"run{run.pk}-*-{fmt}.zip"):
            if stale != target and stale.name.split("-")[1] == real.stem:
                with contextlib.suppress(OSError):
                    stale.unlink()
    return target
