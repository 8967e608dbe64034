"""`manage.py predict`: what the run's Classify, Detect or Segment page does, from the command line.
One image is answered here, by the API's own engine calls (POST /api/runs/<id>/classify/,
detect/, segment/); several images, a folder or an archive become the many-images job of the
run's task (classify-many, detect-many, segment-many), queued through the same service."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from datasets.archives import archive_kind
from datasets.images import ImageRefused
from workbench.core.adapters import command_error
from workbench.core.commands import require_running_workbench
from workbench.core.errors import RequestError
from workbench.core.task_table import task_row
from workbench.inference import engine, renderers, services, validators
from workbench.inference.api import MAX_IMAGE_BYTES
from workbench.inference.management import common
from workbench.runs.templatetags.numbers import percent


class LocalFile:
    """A file of this machine as `services.job_create` takes an upload: a name and its bytes in
    chunks, opened only while it is copied (a folder of thousands of images holds no descriptors)."""

    def __init__(self, path: Path, name: str) -> None:
        self.path, self.name = path, name

    def chunks(self, size: int = 1 << 20):
        with self.path.open("rb") as handle:
            while chunk := handle.read(size):
                yield chunk


class Command(BaseCommand):
    help = (
        "Classify, detect or segment with a run's checkpoint (the run's task decides). One image: prints the "
        "answer. Several images, a folder or a zip/tar archive: queues the many-images job (--wait to follow it)."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", help="the run's id")
        parser.add_argument(
            "files", nargs="+", type=Path, metavar="FILE", help="an image, images, a folder, an archive"
        )
        parser.add_argument("--checkpoint", default="best", help="best | last | a step number (default best)")
        parser.add_argument("--top-k", type=int, help="one image, classifier: classes shown, 1-100 (default 5)")
        parser.add_argument(
            "--min-score", type=float, help="one image, detector: lowest score shown, 0-1 (default 0.05)"
        )
        parser.add_argument(
            "--output", type=Path, help="one image, segmentation: the colour mask PNG; a job with --wait: its "
            "results.csv (a name ending .zip: the CSV and a segment job's colour masks)",
        )  # fmt: skip
        parser.add_argument("--wait", action="store_true", help="a many-images job: wait for it and print it")
        parser.add_argument("--timeout", type=float, default=3600, help="with --wait: give up after this (s)")
        parser.add_argument("--format", choices=("table", "json"), default="table")
        common.add_owner_argument(parser)

    def handle(self, *args, **options):
        run, user = common.run_of(options["run_id"], options["owner"])
        action = task_row(run.dataset.task).action
        output = common.writable(options["output"])
        kind, inputs = self._inputs(options["files"])
        if kind == "image":
            self._one(run, action, inputs, options)
            return
        for option in ("top_k", "min_score"):
            if options[option] is not None:
                raise CommandError(f"--{option.replace('_', '-')} is for one image; a many-images job keeps the "
                                   "top 5 classes, or every box scored 0.05 and up")  # fmt: skip
        if output is not None and not options["wait"]:
            raise CommandError("--output of a many-images job needs --wait (or `manage.py inference_job ID --wait`)")
        require_running_workbench()  # before the job exists: a job no worker hears would wait forever
        try:
            job = services.job_create(
                owner=user, run=run, kind=action, checkpoint=options["checkpoint"],
                archive=inputs if kind == "archive" else None, files=inputs if kind == "files" else (),
            )  # fmt: skip
        except services.InferenceError as error:
            raise command_error(error) from None
        job = common.report_job(self, job, options)
        if job is not None and output is not None:
            self.stderr.write(common.copy_job_results(job, output))

    @staticmethod
    def _inputs(paths: list[Path]):
        """("image", path) for one image; ("archive", file) for one zip or tar; else ("files", [...])
        of every file given and under every folder given (named by their path in it)."""
        for path in paths:
            if not path.exists():
                raise CommandError(f"{path}: no such file or folder")
        if len(paths) == 1 and paths[0].is_file():
            if archive_kind(paths[0]):
                return "archive", LocalFile(paths[0], paths[0].name)
            return "image", paths[0]
        files = []
        for path in paths:
            if path.is_dir():
                files += [LocalFile(f, f.relative_to(path).as_posix()) for f in engine.image_files(path)]
            elif archive_kind(path):
                raise CommandError(f"{path.name} is an archive: give it alone, or its images")
            else:
                files.append(LocalFile(path, path.name))
        if not files:
            raise CommandError(f"no files in {', '.join(str(path) for path in paths)}")
        return "files", files

    def _one(self, run, action: str, path: Path, options) -> None:
        """One image, answered here as the API answers it (its JSON, less the images as data URLs)."""
        try:
            top_k = validators.check_top_k(options["top_k"])
            min_score = validators.check_min_score(options["min_score"])
        except RequestError as error:
            raise command_error(error) from None
        if options["output"] is not None and action != "segment":
            raise CommandError(f"--output of one image writes a segmentation run's mask; run {run.pk} does {action}")
        if path.stat().st_size > MAX_IMAGE_BYTES:
            raise CommandError(f"{path.name} is {path.stat().st_size} bytes, over the {MAX_IMAGE_BYTES} limit for "
                               "one image; give it in a folder to run it as a job")  # fmt: skip
        try:
            image = engine.open_image(path.read_bytes())
        except ImageRefused as error:
            raise CommandError(f"{path.name}: {error}") from None
        try:
            checkpoint = services.checkpoint_path(run=run, which=options["checkpoint"])
            predictor = engine.predictor_of(checkpoint, action)
        except services.InferenceError as error:
            raise command_error(error) from None
        except engine.InferenceInputError as error:
            raise CommandError(f"run #{run.pk}: {error.message}") from None
        body = {"run": run.pk, "checkpoint": checkpoint.name, "image": path.name}
        if action == "classify":
            body["predictions"] = engine.classify_one(predictor, image, top_k)
        elif action == "detect":
            body.update(width=image.size[0], height=image.size[1], labels=predictor.labels,
                        boxes=renderers.detect_one(predictor, image, min_score))  # fmt: skip
        else:
            answer = renderers.segment_one(predictor, image)
            body.update(width=image.size[0], height=image.size[1], classes=answer["classes"])
            if options["output"] is not None:
                options["output"].write_bytes(base64.b64decode(answer["colors"].split(",", 1)[1]))
                body["mask_file"] = str(options["output"])
        self.stdout.write(json.dumps(body, indent=2) if options["format"] == "json" else _one_text(body, min_score))


def _one_text(body: dict, min_score: float) -> str:
    """One image's answer as a table: classes, boxes or class shares."""
    head = f"run {body['run']}, {body['checkpoint']}: {body['image']}"
    if "predictions" in body:
        rows = [[p["label"], percent(p["probability"])] for p in body["predictions"]]
        return "\n".join([head, *common.table(["class", "probability"], rows)])
    if "boxes" in body:
        head += f" ({body['width']}x{body['height']}): {len(body['boxes'])} boxes scored {min_score:g} and up"
        rows = [[b["label"], percent(b["score"]), *(f"{v:.1f}" for v in b["box"])] for b in body["boxes"]]
        return "\n".join([head, *(common.table(["class", "score", "x1", "y1", "x2", "y2"], rows) if rows else [])])
    rows = [[c["label"], c["color"], percent(c["share"])] for c in sorted(body["classes"], key=lambda c: -c["share"])]
    lines = [head + f" ({body['width']}x{body['height']})", *common.table(["class", "colour", "share"], rows)]
    return "\n".join(lines + ([f"wrote the colour mask to {body['mask_file']}"] if "mask_file" in body else []))
