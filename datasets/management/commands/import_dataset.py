"""manage.py import_dataset SOURCE [--name NAME] [options]: import a dataset from the shell.

SOURCE is a folder of class folders, an archive (zip/tar/tar.gz), a text list, an LMDB folder or
a DIGITS dataset job folder; the kind is detected unless --kind says it. As in the browser's
wizard, the name defaults to SOURCE's, and the image size and channels left out are proposed from
the images (the size most of the sampled images have, one channel when all are grey). The build is queued for
the Celery worker like one started in the browser (the command refuses at once when no workbench
runs to take it); --wait waits for it and prints the per-split,
per-class counts; --sync builds in this process instead (no worker needed). The command runs with
the server's own rights, so SOURCE is not limited to WORKBENCH_IMPORT_ROOTS.
Exit status: 0 when created (and, with --wait/--sync, built); 1 on bad input or a failed build.
"""

from __future__ import annotations

import time
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from datasets.archives import ArchiveError
from datasets.building import dataset_build
from datasets.forms import DatasetForm
from datasets.label_runner import CheckTookTooLong
from datasets.labels import FORMATS, LabelError
from datasets.labels.registry import reads_label_files
from datasets.models import Dataset
from datasets.preview import cap_proposal, resize_preview
from datasets.services import dataset_create
from datasets.sources import KINDS, SourceError
from datasets.validators import parse_image_size
from trainer.protocol import TASKS
from workbench.core.commands import command_owner, require_running_workbench


class Command(BaseCommand):
    help = "Import a dataset from a folder, an archive, a text list, an LMDB or a DIGITS job folder."

    def add_arguments(self, parser):
        parser.add_argument("source", help="folder, archive, text list, LMDB folder or DIGITS job folder")
        parser.add_argument("--name", help="the dataset's name (default: SOURCE's name, without .zip, .tar.gz...)")
        parser.add_argument("--kind", choices=KINDS, help="the kind of SOURCE (default: detected)")
        parser.add_argument(
            "--task", choices=TASKS, help="what the labels are for (default: detected in a folder, else classification)"
        )
        parser.add_argument("--format", choices=FORMATS, help="detection/segmentation label format (default: detected)")
        parser.add_argument(
            "--class-map", help='the class table as JSON: {"source class": "new name" (merge: the same name), or null}'
        )
        parser.add_argument("--min-box-size", type=float, help="boxes under this many pixels become ignore regions")
        parser.add_argument("--image-size", help="WxH (default: proposed from the images, else 256x256)")
        parser.add_argument("--channels", type=int, choices=(1, 3), help="(default: proposed from the images, else 3)")
        parser.add_argument("--resize-mode", choices=("squash", "crop", "fill", "half_crop"), default="squash")
        parser.add_argument("--val-percent", type=int, default=25)
        parser.add_argument("--test-percent", type=int, default=0)
        parser.add_argument("--min-per-class", type=int, default=2)
        parser.add_argument("--max-per-class", type=int)
        parser.add_argument("--encoding", choices=("none", "png", "jpg"), default="png")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--no-shuffle", action="store_true", help="keep images in class and name order")
        parser.add_argument("--labels", help="labels file (text lists; optional for LMDBs)")
        parser.add_argument("--image-folder", help="text lists: folder that relative paths start from")
        parser.add_argument("--val", help="separate validation folder, text list or LMDB")
        parser.add_argument("--test", help="separate test folder, text list or LMDB")
        parser.add_argument("--owner", help="username of the owner (default: the only superuser)")
        parser.add_argument("--wait", action="store_true", help="wait for the worker's build and print the counts")
        parser.add_argument("--sync", action="store_true", help="build in this process instead of the worker")
        parser.add_argument("--timeout", type=float, default=0, help="with --wait: give up after this many seconds")

    def handle(self, *args, **opts):
        owner = command_owner(opts["owner"])
        form = self._form(opts, owner)
        if opts["image_size"] is None or opts["channels"] is None:
            form = self._with_proposal(form, opts, owner)
        checked = self._label_check(form)  # before the row: a source its labels refuse leaves none
        if not opts["sync"]:
            require_running_workbench()  # before the row exists: nothing is left pending
        with transaction.atomic():
            dataset = dataset_create(
                owner=owner,
                name=form.cleaned_data["name"],
                kind=form.cleaned_data["kind"],
                source=form.source(),
                options=form.options(),
                queue=not opts["sync"],
            )
        self.stdout.write(str(dataset.pk))
        if checked:
            self.stderr.write(checked)
        if opts["sync"]:
            dataset_build(dataset_id=dataset.pk)
        elif opts["wait"]:
            self._wait(dataset, opts["timeout"])
        else:
            return
        dataset.refresh_from_db()
        if dataset.status != Dataset.Status.READY:
            raise CommandError(f"dataset {dataset.pk} {dataset.status}: {dataset.error}")
        self._print_counts(dataset)

    def _form(self, opts: dict, owner, *, proposed: dict | None = None) -> DatasetForm:
        """The browser's form, filled from the options: the same rules for the same fields."""
        proposed = proposed or {}
        try:
            width, height = parse_image_size(opts["image_size"]) if opts["image_size"] else (None, None)
        except ValidationError as exc:
            raise CommandError(f"--image-size: {exc.messages[0]}") from None
        data = {
            "name": opts["name"] or default_name(opts["source"]),
            "kind": opts["kind"] or "auto",
            "task": opts["task"] or "auto",
            "format": opts["format"] or "auto",
            "class_map": opts["class_map"] or "",
            "min_box_size": opts["min_box_size"] or 0,
            "source_path": opts["source"],
            "labels_path": opts["labels"] or "",
            "image_folder": opts["image_folder"] or "",
            "val_path": opts["val"] or "",
            "test_path": opts["test"] or "",
            "image_width": width or proposed.get("width", 256),
            "image_height": height or proposed.get("height", 256),
            "channels": opts["channels"] or proposed.get("channels", 3),
            "resize_mode": opts["resize_mode"],
            "encoding": opts["encoding"],
            "val_percent": opts["val_percent"],
            "test_percent": opts["test_percent"],
            "min_per_class": opts["min_per_class"],
            "max_per_class": opts["max_per_class"] or "",
            "shuffle": "false" if opts["no_shuffle"] else "true",
            "seed": opts["seed"],
        }
        form = DatasetForm(data, user=owner, restrict_to_roots=False)
        if not form.is_valid():
            raise CommandError(self._errors(form))
        return form

    def _with_proposal(self, form: DatasetForm, opts: dict, owner) -> DatasetForm:
        """The form again with the size and channels the wizard would propose for what the
        command line left out; the form as it is where the source proposes nothing (an LMDB
        keeps its own size, and a source with no readable image is the build's to refuse)."""
        c = form.cleaned_data
        if c["kind"] in ("lmdb", "digits"):
            return form
        try:
            preview = resize_preview(
                kind=c["kind"],
                path=c["source_path"],
                width=c["image_width"],
                height=c["image_height"],
                channels=c["channels"],
                resize_mode=c["resize_mode"],
                labels_path=c.get("labels_path") or None,
                image_folder=c.get("image_folder") or None,
            )
        except (SourceError, ArchiveError, OSError):
            return form
        proposed = cap_proposal(preview["proposed"], settings.MAX_IMAGE_SIDE)
        form = self._form(opts, owner, proposed=proposed)
        self.stderr.write(proposal_text(form.cleaned_data, proposed, given=opts))
        return form

    @staticmethod
    def _label_check(form: DatasetForm) -> str:
        """The label check in words, for a folder and an archive alike (an archive's is read now,
        as the wizard's preview reads it: it printed nothing and its problems surfaced only at the
        build); "" for a classifier. A check out of time says so: the build still reads every file."""
        try:
            check = form.label_check()
        except CheckTookTooLong as unfinished:
            return str(unfinished)
        except (LabelError, ArchiveError) as error:
            raise CommandError(f"SOURCE: {error}") from None
        return label_check_text(check) if check else ""

    @staticmethod
    def _errors(form) -> str:
        names = {
            "source_path": "SOURCE",
            "labels_path": "--labels",
            "image_folder": "--image-folder",
            "val_path": "--val",
            "test_path": "--test",
            "__all__": "SOURCE",
        }
        lines = []
        for field, errors in form.errors.items():
            label = names.get(field, "--" + field.replace("_", "-"))
            lines += [f"{label}: {e}" for e in errors]
        return "\n".join(lines)

    def _wait(self, dataset: Dataset, timeout: float) -> None:
        start = time.monotonic()
        last = None
        while True:
            dataset.refresh_from_db()
            if not dataset.is_active:
                return
            state = (dataset.status, dataset.progress_done)
            if state != last and dataset.progress_total:
                self.stderr.write(f"{dataset.status} {dataset.progress_done}/{dataset.progress_total}")
                last = state
            if timeout and time.monotonic() - start > timeout:
                raise CommandError(f"dataset {dataset.pk} is still {dataset.status} after {timeout:g} s")
            time.sleep(1)

    def _print_counts(self, dataset: Dataset) -> None:
        splits = [s for s in ("train", "val", "test") if s in dataset.splits]
        # A classifier's line stays DIGITS's; a task with label files says which and what is counted.
        labelled = reads_label_files(dataset.task)
        task = f"{dataset.task}, " if labelled else ""
        counted = f", {dataset.task_row.counts_title.lower()}" if labelled else ""
        self.stdout.write(
            f"dataset {dataset.pk} ready: {task}{dataset.image_count} images, {len(dataset.labels)} classes, "
            f"{dataset.image_width}x{dataset.image_height}x{dataset.channels}, {dataset.skipped_count} skipped"
            f"{counted}"
        )
        width = max([5, *(len(label) for label in dataset.labels)])
        self.stdout.write("class".ljust(width) + "".join(s.rjust(8) for s in splits))
        for row in dataset.class_counts():
            self.stdout.write(row["name"].ljust(width) + "".join(str(row[s]).rjust(8) for s in splits))
        self.stdout.write("total".ljust(width) + "".join(str(dataset.splits[s]["count"]).rjust(8) for s in splits))


def proposal_text(chosen: dict, proposed: dict, *, given: dict) -> str:
    """What the import uses, each option said as given (on the command line) or as proposed (from
    the sampled images), with the proposal beside a given value that differs from it."""
    size, proposed_size = (
        f"{chosen['image_width']}x{chosen['image_height']}",
        f"{proposed['width']}x{proposed['height']}",
    )
    sampled = f"{proposed['sampled']} sampled images"
    if given["image_size"]:
        differs = f"; {sampled} propose {proposed_size}" if size != proposed_size else ""
        size_text = f"image size {size} as given by --image-size{differs}"
    else:
        size_text = f"image size {size} proposed from {sampled} ({proposed['same_size']} of that size)"
    channels = f"{chosen['channels']} channel{'s' if chosen['channels'] > 1 else ''}"
    if given["channels"]:
        differs = f"; {sampled} propose {proposed['channels']}" if chosen["channels"] != proposed["channels"] else ""
        channels_text = f"{channels} as given by --channels{differs}"
    else:
        channels_text = f"{channels} proposed from {sampled}"
    left_out = [
        option for option, key in (("--image-size", "image_size"), ("--channels", "channels")) if not given[key]
    ]
    verb = "choose" if len(left_out) > 1 else "chooses"
    return f"{size_text}; {channels_text}; {' and '.join(left_out)} {verb} otherwise"


def label_check_text(check: dict) -> str:
    """The label check in a few lines: format, each class with its count and where it goes, and
    the problems counted by kind with the first few named by file and line."""
    lines = [f"{check['task']} labels in {check['format']} format: {check['images']} images ({check['count_means']})"]
    for row in check["classes"]:
        target = row["maps_to"]
        goes = "ignored" if target is None else ("" if target == row["name"] else f"-> {target}")
        lines.append(f"  {row['name']}: {row['count']} {goes}".rstrip())
    if own := check.get("own_split"):
        counts = ", ".join(f"{split} {n}" for split, n in own["counts"].items())
        lines.append(
            f"split by the source's own lists ({', '.join(own['lists'])}): {counts}; "
            "--val-percent, --test-percent and --seed are not used"
        )
    report = check["report"]
    for kind, count in report["counts"].items():
        lines.append(f"{count} {kind}: {report['meaning'][kind]}")
    for problem in report["problems"][:10]:
        where = problem["file"] + (f" line {problem['line']}" if problem["line"] else "")
        lines.append(f"  {where}: {problem['message']}")
    return "\n".join(lines)


def default_name(source: str) -> str:
    """The source's own name without its archive or list suffix: "pets.tar.gz" names "pets"."""
    name = Path(source.rstrip("/")).name
    for suffix in (".tar.gz", ".tgz", ".tar", ".zip", ".txt"):
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name
