"""What the inference commands share (`predict`, `test_run`, `export`, `inference_job`): whom they
act for and on which run or job (the API's selectors, the commands' one owner rule), following a
job to its end, printing it as a table or as the API's JSON, and copying its results out."""

from __future__ import annotations

import json
import shutil
import time
import zipfile
from pathlib import Path

from django.core.management.base import CommandError
from django.http import Http404

from trainer.config import shown
from workbench.core.commands import command_owner
from workbench.core.ids import parse_id
from workbench.core.task_table import task_row
from workbench.inference import services
from workbench.inference.api import job_json
from workbench.inference.models import InferenceJob
from workbench.inference.selectors import job_for
from workbench.runs.models import Run
from workbench.runs.selectors import run_for
from workbench.runs.templatetags.numbers import bytes_size, percent

# A table of a job's images shows this many; the rest are in its CSV (--output).
SHOWN_ROWS = 20
# The slowest a run of `--wait` polls the database (a job reports every batch).
POLL_SECONDS = 1.0


def add_owner_argument(parser) -> None:
    parser.add_argument("--owner", help="username to act as (default: the run's owner); staff act on any run")


def run_of(raw_id, owner_name: str | None) -> tuple[Run, object]:
    """The run and the user the command acts for: --owner, else the run's owner (the one rule of
    every command), who must be allowed the run by the API's own selector (owner or staff)."""
    pk = parse_id(raw_id)
    run = Run.objects.select_related("owner", "dataset").filter(pk=pk).first() if pk else None
    if run is None:
        raise CommandError(f"no run with id {shown(pk or raw_id)}")
    user = command_owner(owner_name, default=run.owner)
    try:
        return run_for(user, run.pk), user
    except Http404:
        raise CommandError(f"run {run.pk} does not belong to {user.username}") from None


def job_of(raw_id, owner_name: str | None) -> InferenceJob:
    """The inference job, for --owner (else its owner) by the API's selector."""
    pk = parse_id(raw_id)
    job = InferenceJob.objects.select_related("owner").filter(pk=pk).first() if pk else None
    if job is None:
        raise CommandError(f"no inference job with id {shown(pk or raw_id)}")
    user = command_owner(owner_name, default=job.owner)
    try:
        return services.job_check_stale(job=job_for(user, job.pk))
    except Http404:
        raise CommandError(f"job {job.pk} does not belong to {user.username}") from None


def writable(path: Path | None, option: str = "--output") -> Path | None:
    """The output file, refused before any work when its folder is missing or it is a folder."""
    if path is None:
        return None
    if path.is_dir():
        raise CommandError(f"{option} {path} is a folder; give a file name")
    if not path.parent.is_dir():
        raise CommandError(f"{option} {path}: the folder {path.parent} does not exist")
    return path


def wait_for_job(job: InferenceJob, *, say, timeout: float) -> InferenceJob:
    """Polls the job until it ends, saying its state and progress when they change."""
    deadline, last = time.monotonic() + timeout, ""
    while True:
        job = services.job_check_stale(job=InferenceJob.objects.select_related("run__dataset").get(pk=job.pk))
        line = f"job {job.pk}: {job.state}"
        if job.state == InferenceJob.State.RUNNING and job.progress_total:
            line += f" {job.progress_done}/{job.progress_total} images"
        if line != last:
            say(line)
            last = line
        if not job.is_active:
            return job
        if time.monotonic() > deadline:
            raise CommandError(f"job {job.pk} still {job.state} after {timeout:.0f} s; follow it with "
                               f"`manage.py inference_job {job.pk} --wait`")  # fmt: skip
        time.sleep(POLL_SECONDS)


def report_job(command, job: InferenceJob, options: dict) -> InferenceJob | None:
    """What a command says of a job it queued: its id and how to follow it (no --wait, None), or
    the job followed to its end and printed; a job that did not end done fails the command."""
    if not options["wait"]:
        command.stdout.write(str(job.pk) if options["format"] == "json" else queued_words(job))
        return None
    job = wait_for_job(job, say=command.stderr.write, timeout=options["timeout"])
    command.stdout.write(job_text(job, as_json=options["format"] == "json"))
    if job.state != InferenceJob.State.DONE:
        raise CommandError(f"job {job.pk} failed: {job.error}")
    return job


def queued_words(job: InferenceJob) -> str:
    """What a command says of a job it queued without --wait: its id and how to follow it."""
    return (
        f"job {job.pk} queued ({job.get_kind_display().lower()} on {job.input_name}); follow it with "
        f"`manage.py inference_job {job.pk} --wait` or GET /api/inference/jobs/{job.pk}/"
    )


def job_text(job: InferenceJob, *, as_json: bool) -> str:
    """A finished job as the API's JSON (GET /api/inference/jobs/<id>/) or as a table."""
    if as_json:
        return json.dumps(job_json(job), indent=2)
    head = (
        f"job {job.pk} ({job.get_kind_display().lower()}, run {job.run_id}, checkpoint {job.checkpoint}): {job.state}"
    )
    if job.is_active and job.progress_total:
        return f"{head} {job.progress_done}/{job.progress_total} images"
    if job.state != InferenceJob.State.DONE:
        return head + (f": {job.error}" if job.error else "")
    result = job.result or {}
    lines = [head]
    if job.kind == InferenceJob.Kind.TEST:
        lines += test_lines(result)
    else:
        lines += many_lines(job, services.job_rows(job=job))
    if result.get("skipped"):
        lines.append(f"skipped {len(result['skipped'])} files (first: {result['skipped'][0]['path']}: "
                     f"{result['skipped'][0]['reason']})")  # fmt: skip
    return "\n".join(lines)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell, the first left-aligned, the others right-aligned."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]

    def line(cells) -> str:
        return "  ".join(
            str(cell).ljust(width) if i == 0 else str(cell).rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(header), *(line(row) for row in rows)]


def many_lines(job: InferenceJob, rows: list[dict]) -> list[str]:
    """A many-images job: one line per image (the first SHOWN_ROWS), its task's answer."""
    result = job.result or {}
    lines = [f"{result.get('count', 0)} images"]
    if job.kind == InferenceJob.Kind.CLASSIFY:
        header = ["image", "class", "probability"]
        body = [[row["path"], row["top"][0]["label"], percent(row["top"][0]["probability"])] for row in rows]
    elif job.kind == InferenceJob.Kind.DETECT:
        counts = ", ".join(f"{label} {n}" for label, n in sorted(result.get("class_counts", {}).items()))
        lines[0] += (
            f", {result.get('boxes', 0)} boxes scored {result.get('min_score', 0.05)} and up: {counts or 'none'}"
        )
        header = ["image", "boxes", "best boxes"]
        body = [[row["path"], str(len(row["boxes"])), _words(row["boxes"][:3], "label", "score")] for row in rows]
    else:
        header = ["image", "class shares"]
        body = [[row["path"], _words(sorted(row["shares"].items(), key=lambda item: -item[1]))] for row in rows]
    lines += table(header, body[:SHOWN_ROWS])
    if len(rows) > SHOWN_ROWS:
        lines.append(f"... and {len(rows) - SHOWN_ROWS} more images: all of them in the results (--output FILE)")
    return lines


def _words(items, *keys: str) -> str:
    """(label, fraction) pairs, or dicts read by their two keys, as "disc 91.20%, square 8.80%"."""
    pairs = [(item[keys[0]], item[keys[1]]) for item in items] if keys else items
    return ", ".join(f"{label} {percent(value)}" for label, value in pairs)


def test_lines(result: dict) -> list[str]:
    """A test's measures in the test page's words (the task's row: accuracy of a classifier, COCO
    mAP of a detector, mIoU of a segmenter), its table of classes, then a segmenter's notes and a
    classifier's confusion matrix where the result holds them."""
    words = task_row(result.get("task")).test_words
    named = [f"{name.format(top_k=result.get('top_k'))} {percent(result[key])}" for key, name in words.headline]
    lines = [f"{result['count']} images: {', '.join(named)}"]
    (count, count_name), measures = words.count, words.per_class
    body = [[c["label"], str(c[count]), *(percent(c[key]) for key, _ in measures)] for c in result["per_class"]]
    lines += table(["class", count_name, *(name for _, name in measures)], body) + result.get("notes", [])
    if "confusion" not in result:
        return lines
    labels = result["labels"]
    lines.append("confusion (rows: true class, columns: predicted)")
    return lines + table(
        ["", *labels], [[label, *map(str, row)] for label, row in zip(labels, result["confusion"], strict=True)]
    )


def copy_job_results(job: InferenceJob, output: Path) -> str:
    """A many-images job's results.csv at `output`; a name ending .zip gets the CSV and, for a
    segment job, each image's colour mask named after the image. Says what it wrote."""
    folder = job.folder / "out"
    csv = folder / "results.csv"
    if job.kind == InferenceJob.Kind.TEST or not csv.is_file():
        raise CommandError(f"job {job.pk} has no results file to copy (a test's measures print with --format json)")
    if output.suffix.lower() != ".zip":
        shutil.copyfile(csv, output)
        return f"wrote {output} ({bytes_size(output.stat().st_size)})"
    partial = output.with_name(output.name + ".partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.write(csv, "results.csv")
        used: set[str] = set()
        for row in services.job_rows(job=job):
            mask = folder / "masks" / row.get("mask", "")
            if row.get("mask") and mask.is_file():
                name = f"masks/{Path(row['path']).with_suffix('.png').as_posix()}"
                name = name if name not in used else f"masks/{row['mask']}"
                used.add(name)
                archive.write(mask, name)
    partial.replace(output)
    return f"wrote {output} ({bytes_size(output.stat().st_size)})"
