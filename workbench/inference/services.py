"""Inference on runs: checkpoints, one-image classification, background jobs, exports.

Jobs (classify many, test) are rows claimed by a Celery task with a conditional update; the task
extracts the upload, starts the engine in a subprocess (job.py) and relays its progress to the row
(the engine speaks the trainer's protocol: events on stdout, the result in `out/result.json`; see
workbench/inference/engine.py). The checkpoint file layout is trainer/protocol.py's.
Exports are built by workers: see `workbench.inference.exports`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
from datetime import timedelta
from pathlib import Path

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from datasets.image_limits import configured_image_limits
from trainer import protocol
from trainer.config import shown
from workbench.core.errors import RequestError
from workbench.core.task_table import row_of_action, task_row
from workbench.inference import activations, engine
from workbench.inference.models import InferenceJob
from workbench.runs.models import Run
from workbench.runs.selectors import best_metric_of
from workbench.runs.templatetags.numbers import metric, metric_name
from workbench.workers.following import follow_child
from workbench.workers.processes import EventTail, GracefulStop, start_child

log = logging.getLogger(__name__)

# An engine asked to stop (its job deleted) has this long before it is killed: it holds no state worth saving.
ENGINE_STOP_GRACE_SECONDS = 5.0


class InferenceError(RequestError):
    """A request that cannot be served: (field, message) as every RequestError."""


def input_error(error: engine.InferenceInputError) -> InferenceError:
    """The engine's refusal of an input (it runs without Django) as a request error."""
    return InferenceError(error.field, error.message)


# ----------------------------------------------------------------------------- checkpoints


def checkpoint_choices(*, run: Run) -> list[dict]:
    """What a user may pick: best, latest, then every kept snapshot with its metrics."""
    snapshots = protocol.snapshots(run.run_dir)
    has_best = protocol.best_checkpoint(run.run_dir) is not None
    if not snapshots and not has_best:
        return []
    index = protocol.read_index(run.run_dir)
    # The metric that chose "best" first: a detector's mAP, a segmentation network's mIoU (with
    # only the loss shown, "best" read as worse than "last" whenever the loss still fell).
    chosen = best_metric_of(run)
    shown_metrics = ("top1", "val_loss") if chosen in ("top1", "val_loss") else (chosen, "val_loss")

    def describe(meta: dict | None) -> str:
        meta = meta or {}
        # In the pages' words and numbers ("top-1 97.75%, val. loss 0.0812"), as on the run page,
        # of the weights the checkpoint holds where the run keeps an average: the raw ones or the
        # average (its index says which; one written before issue 33 held the average).
        averaged = any(key.startswith(protocol.EMA_PREFIX) for key in meta)
        weights = meta.get("weights", protocol.AVERAGE) if averaged else protocol.RAW
        held = {key: protocol.checkpoint_series(key, averaged=weights == protocol.AVERAGE) for key in shown_metrics}
        parts = [f"{metric_name(key)} {metric(meta[name], key)}" for key, name in held.items() if name in meta]
        whose = f" of the {protocol.WEIGHTS_WORDS[weights]}" if averaged else ""
        return f" ({', '.join(parts)}{whose})" if parts else ""

    best = index.get("best") or {}
    choices = []
    if has_best:
        choices.append({"value": "best", "label": f"best: step {best.get('step', '?')}{describe(best)}"})
    if snapshots:
        step, _ = snapshots[-1]
        meta = index["snapshots"].get(protocol.snapshot_name(step))
        choices.append({"value": "last", "label": f"last: step {step}{describe(meta)}"})
    for step, path in reversed(snapshots):
        choices.append({"value": str(step), "label": f"step {step}{describe(index['snapshots'].get(path.name))}"})
    return choices


def checkpoint_path(*, run: Run, which: str = "best") -> Path:
    """`best` | `last` (or `latest`) | a step number | a snapshot file name -> the file."""
    which = "best" if which in (None, "") else which
    if not isinstance(which, str) or len(which) > 40:
        # A 400-digit step made a file name the system refuses (OSError: a 500, with the run's
        # folder in the log); no step or snapshot name is that long.
        raise InferenceError("checkpoint", f"{shown(which)} is not best, last or a step number")
    which = which.strip()
    best, latest = protocol.best_checkpoint(run.run_dir), protocol.latest_checkpoint(run.run_dir)
    if which == "best":
        path = best or latest
    elif which in ("last", "latest"):
        path = latest or best
    elif which.isdigit() or protocol.snapshot_step(which) is not None:
        name = which if which.endswith(".pt") else protocol.snapshot_name(int(which))
        path = protocol.checkpoint_dir(run.run_dir) / name
        if not path.is_file():
            kept = ", ".join(str(step) for step, _ in protocol.snapshots(run.run_dir)) or "none"
            raise InferenceError("checkpoint", f"run {run.pk} has no checkpoint at step {which} (kept: {kept})")
    else:
        raise InferenceError("checkpoint", f"{which!r} is not best, last or a step number")
    if path is None:
        raise InferenceError("checkpoint", f"run {run.pk} has no checkpoint yet ({run.state})")
    return path


def checkpoint_layers(*, run: Run, which: str = "best") -> tuple[list[dict], list[str]]:
    """The layers of the run's checkpoint one can look inside, and the ones shown first (the
    checkpoint is read here, not in the page's view; OSError, ValueError, KeyError: unreadable)."""
    classifier = engine.load_classifier(checkpoint_path(run=run, which=which))
    return activations.inspectable_layers(classifier.model), activations.default_layers(classifier.model)


# ----------------------------------------------------------------------------- jobs


def _save_upload(upload, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with dest.open("wb") as fh:
        for chunk in upload.chunks():
            fh.write(chunk)


def _safe_name(name: str) -> str:
    base = os.path.basename(name.replace("\\", "/")) or "file"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", base)[:120] or "file"


def check_job_kind(*, run: Run, kind: str, source: str) -> None:
    """A run's many-images job is its task's (a detector's run detects, never classifies); a test
    of a detector or segmentation network is on a split of its dataset, whose labels are known."""
    row = task_row(run.dataset.task)
    asked = row_of_action(kind)  # the many-images job of a task (a test measures whatever the run's task is)
    if asked is not None and asked is not row:
        raise InferenceError("run", f"run #{run.pk} is a {row.name} run: it does not {asked.action}; use {row.action}")
    if kind == InferenceJob.Kind.TEST and not row.tests_uploads and source == InferenceJob.Source.UPLOAD:
        raise InferenceError(
            "source", f"a {row.name} run is tested on its dataset's validation or test split, not on uploaded images"
        )


def job_create(
    *,
    owner,
    run: Run,
    kind: str,
    checkpoint: str = "best",
    source: str = InferenceJob.Source.UPLOAD,
    archive=None,
    files=(),
) -> InferenceJob:
    """A queued job. The upload is either one archive (zip / tar, extracted by the task) or some
    image files; a test may instead use the dataset's `val` or `test` split."""
    if kind not in InferenceJob.Kind.values:
        raise InferenceError("kind", f"{kind!r} is not one of {', '.join(InferenceJob.Kind.values)}")
    if kind != InferenceJob.Kind.TEST:
        source = InferenceJob.Source.UPLOAD
    check_job_kind(run=run, kind=kind, source=source)
    checkpoint_path(run=run, which=checkpoint)  # names the problem now, not in the worker
    files = list(files or [])
    if source not in InferenceJob.Source.values:
        raise InferenceError("source", f"{source!r} is not one of {', '.join(InferenceJob.Source.values)}")
    if source == InferenceJob.Source.UPLOAD:
        if archive is None and not files:
            raise InferenceError("images", "upload an archive (zip, tar) or one or more images")
        if archive is not None and files:
            raise InferenceError("images", "upload either an archive or images, not both")
    else:
        splits = run.dataset.splits or {}
        if not splits.get(source, {}).get("count"):
            have = ", ".join(name for name, split in splits.items() if split.get("count")) or "none"
            raise InferenceError("source", f"dataset {run.dataset.name!r} has no {source} split (it has {have})")
    name = (
        archive.name
        if archive is not None
        else (files[0].name if len(files) == 1 else f"{len(files)} images")
        if source == "upload"
        else f"{source} split"
    )
    with transaction.atomic():
        job = InferenceJob.objects.create(
            owner=owner, run=run, kind=kind, checkpoint=checkpoint or "best", source=source, input_name=name[:300]
        )
        shutil.rmtree(job.folder, ignore_errors=True)  # a reused id of a deleted database
        if archive is not None:
            _save_upload(archive, job.folder / "upload.archive")
        for upload in files:
            target = job.folder / "input" / _safe_name(upload.name)
            stem, suffix, n = target.stem, target.suffix, 1
            while target.exists():
                target = target.with_name(f"{stem}-{n}{suffix}")
                n += 1
            _save_upload(upload, target)
        transaction.on_commit(lambda: _queue(job.pk))
    return job


def _queue(job_id: int) -> None:
    # By the task's name (tasks.run_inference_job): the tasks module imports this one.
    current_app.send_task("workbench.inference.tasks.run_inference_job", args=[job_id])


def _finish(job: InferenceJob, *, state: str, error: str = "", result: dict | None = None) -> None:
    fields = {"state": state, "error": error, "finished_at": timezone.now()}
    if result is not None:
        fields["result"] = result
    InferenceJob.objects.filter(pk=job.pk, state=InferenceJob.State.RUNNING).update(**fields)


def _prepare_input(job: InferenceJob) -> dict:
    """The engine's spec; extracts an uploaded archive into `input/`."""
    # only jobs on an uploaded archive need these
    from datasets.archives import ArchiveError, Caps, extract_archive  # archive jobs only

    spec = {
        "kind": job.kind,
        "checkpoint": str(checkpoint_path(run=job.run, which=job.checkpoint)),
        "out": str(job.folder / "out"),
        # The child runs without Django: it is handed the limits of settings for its images.
        "image_limits": configured_image_limits().as_dict(),
    }
    if job.source != InferenceJob.Source.UPLOAD:
        # torch (with the trainer) is loaded only where this runs, never by every web process
        from trainer.dataset_folder import load_dataset_folder  # torch: loaded only where this runs

        info = load_dataset_folder(job.run.dataset_folder)
        if job.source not in info.splits:
            raise InferenceError("source", f"dataset {job.run.dataset.name!r} has no {job.source} split")
        split = info.splits[job.source]
        spec["split_db"] = str(split.db)
        if split.overlay is not None:  # a dataset version's split: the job reads it through its overlay
            spec["version_folder"], spec["split"] = str(job.run.dataset_folder), job.source
        if split.names is not None:  # each image's source name, for the test's galleries
            spec["split_names"] = str(split.names)
        if split.targets_db is not None:  # a detection or segmentation split: its boxes or masks
            spec["targets_db"] = str(split.targets_db)
        return spec
    archive = job.folder / "upload.archive"
    if archive.exists():
        caps = Caps(
            settings.ARCHIVE_MAX_BYTES,
            settings.ARCHIVE_MAX_MEMBERS,
            settings.ARCHIVE_MAX_RATIO,
            settings.ARCHIVE_RATIO_GRACE_BYTES,
        )
        shutil.rmtree(job.folder / "input", ignore_errors=True)
        try:
            extract_archive(archive, job.folder / "input", caps)
        except ArchiveError as error:
            raise InferenceError("images", str(error)) from None
        archive.unlink()
    spec["input"] = str(job.folder / "input")
    return spec


def _engine_run(job: InferenceJob, spec_path: Path) -> tuple[int, dict]:
    """Runs the engine on the spec in a child process (a job's heavy work never runs in the worker
    itself) and follows the events it writes (trainer/protocol.py) with the one loop of every
    child a worker follows (workers.following); its exit code and its final status. A job deleted
    or ended meanwhile stops its engine."""
    events_path = job.folder / protocol.events_name(1)
    events_path.unlink(missing_ok=True)
    with (job.folder / "engine.log").open("ab") as output:
        argv = [sys.executable, "-m", "workbench.inference.job", str(spec_path), str(events_path)]
        process = start_child(argv, stdout=output, own_session=True)
    engine = EngineWatch(job, EventTail(events_path))
    stop = GracefulStop.of_process(process, grace_seconds=ENGINE_STOP_GRACE_SECONDS, name=f"job {job.pk}'s engine")
    look_every = settings.HEARTBEAT_SECONDS
    code = follow_child(process, stop=stop, store=engine.store, look=lambda: engine.look(stop), look_every=look_every)
    return code, engine.final


class EngineWatch:
    """What the watch of an inference job stores (its progress, as its liveness) and looks at."""

    def __init__(self, job: InferenceJob, tail: EventTail) -> None:
        self.job, self.tail = job, tail
        self.final: dict = {}

    def store(self) -> None:
        for event in self.tail.read():
            if event.get("type") == protocol.PROGRESS:
                InferenceJob.objects.filter(pk=self.job.pk).update(
                    progress_done=event["done"], progress_total=event["total"], heartbeat_at=timezone.now()
                )
            elif event.get("type") == protocol.STATUS:
                self.final = event

    def look(self, stop: GracefulStop) -> None:
        # The watch's own word keeps a job that is slow between two progress events from being
        # taken for lost (jobs_fail_stale); a job deleted or ended meanwhile stops its engine.
        following = InferenceJob.objects.filter(pk=self.job.pk, state=InferenceJob.State.RUNNING)
        if not following.update(heartbeat_at=timezone.now()):
            stop.request()


def job_run(*, job_id: int) -> str:
    """Runs a queued job to its end (the Celery task's body); a second delivery does nothing."""
    now = timezone.now()
    claimed = InferenceJob.objects.filter(pk=job_id, state=InferenceJob.State.QUEUED).update(
        state=InferenceJob.State.RUNNING, started_at=now, heartbeat_at=now
    )
    if not claimed:
        return "not queued"
    job = InferenceJob.objects.select_related("run__dataset").get(pk=job_id)
    try:
        spec = _prepare_input(job)
    except (InferenceError, OSError, ValueError) as error:
        _finish(job, state=InferenceJob.State.FAILED, error=str(error))
        return "failed"
    out = Path(spec["out"])
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    spec_path = job.folder / "spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    code, final = _engine_run(job, spec_path)
    result_path = out / "result.json"
    if code != protocol.EXIT_DONE or not result_path.exists():
        error = final.get("message", "") if final.get("state") == protocol.FAILED else ""
        if not error:
            tail = (job.folder / "engine.log").read_text(errors="replace").strip().splitlines()[-1:]
            error = f"the inference process ended with code {code}" + (f": {tail[0]}" if tail else "")
        _finish(job, state=InferenceJob.State.FAILED, error=error)
        return "failed"
    result = json.loads(result_path.read_text(encoding="utf-8"))
    summary = {key: value for key, value in result.items() if key != "rows"}
    InferenceJob.objects.filter(pk=job.pk).update(progress_done=summary.get("count", 0))
    _finish(job, state=InferenceJob.State.DONE, result=summary)
    shutil.rmtree(job.folder / "input", ignore_errors=True)  # the results stay, the upload goes
    return "done"


def _fail_stale(jobs) -> int:
    cutoff = timezone.now() - timedelta(seconds=InferenceJob.STALE_SECONDS)
    return jobs.filter(state=InferenceJob.State.RUNNING, heartbeat_at__lt=cutoff).update(
        state=InferenceJob.State.FAILED,
        finished_at=timezone.now(),
        error=f"the worker running this job stopped reporting for {InferenceJob.STALE_SECONDS // 60} minutes "
        "(killed or restarted); start the job again",
    )


def job_check_stale(*, job: InferenceJob) -> InferenceJob:
    """Fails a running job whose worker stopped reporting (killed, restarted); returns it fresh."""
    if job.state != InferenceJob.State.RUNNING or job.heartbeat_at is None:
        return job
    if _fail_stale(InferenceJob.objects.filter(pk=job.pk)):
        job.refresh_from_db()
    return job


def jobs_fail_stale() -> int:
    """Every running job whose worker stopped reporting, failed (each worker heartbeat runs this,
    so lists and the API say so without anyone opening the job)."""
    return _fail_stale(InferenceJob.objects.all())


def job_rows(*, job: InferenceJob) -> list[dict]:
    """The per-image rows of a finished classify job."""
    path = job.folder / "out" / "result.json"
    if job.state != InferenceJob.State.DONE or not path.exists():
        return []
    return json.loads(path.read_text(encoding="utf-8")).get("rows", [])


def job_delete(*, job: InferenceJob) -> None:
    job.delete()  # its files go with it (receivers.remove_job_files)
