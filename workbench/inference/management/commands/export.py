"""`manage.py export`: the run's Export page from the command line: asks for the zip of a
checkpoint's bundle, TorchScript or ONNX export as GET /api/runs/<id>/download/ does (the same
`exports.export_request`: a format the network cannot take is refused before anything is built;
a worker builds the rest once), then, with --wait, asks again until it is built and copies it."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from workbench.core.adapters import command_error
from workbench.core.commands import require_running_workbench
from workbench.inference import exports, services
from workbench.inference.management import common
from workbench.runs.templatetags.numbers import bytes_size

# As the API's Retry-After: how often a waiting command asks again.
RETRY_SECONDS = 2.0


class Command(BaseCommand):
    help = "Export a run's checkpoint (bundle, TorchScript or ONNX) as a zip; a worker builds it, --wait copies it."

    def add_arguments(self, parser):
        parser.add_argument("run_id", help="the run's id")
        parser.add_argument("--format", choices=exports.EXPORT_FORMATS, default="bundle", help="default bundle")
        parser.add_argument("--checkpoint", default="best", help="best | last | a step number (default best)")
        parser.add_argument("--output", type=Path, required=True, help="where to write the zip")
        parser.add_argument("--wait", action="store_true", help="wait while a worker builds it, then copy it")
        parser.add_argument("--timeout", type=float, default=3600, help="with --wait: give up after this (s)")
        common.add_owner_argument(parser)

    def handle(self, *args, **options):
        run, _ = common.run_of(options["run_id"], options["owner"])
        output = common.writable(options["output"])
        fmt, checkpoint = options["format"], options["checkpoint"]
        require_running_workbench()  # a worker builds the export
        deadline, said = time.monotonic() + options["timeout"], False
        while True:
            try:
                export = exports.export_request(run=run, fmt=fmt, checkpoint=checkpoint)
            except services.InferenceError as error:
                raise command_error(error) from None
            if export.state == "failed":
                raise command_error(services.InferenceError(export.field, export.error))
            if export.state == "ready":
                shutil.copyfile(export.path, output)
                self.stdout.write(f"wrote {output} ({bytes_size(output.stat().st_size)}): the {fmt} export of "
                                  f"run {run.pk}, checkpoint {checkpoint}")  # fmt: skip
                return
            words = f"the {fmt} export of run {run.pk}, checkpoint {checkpoint}, is being built by a worker"
            if not options["wait"]:
                self.stdout.write(f"{words}; run this again (or with --wait) to copy it to {output}")
                return
            if not said:
                self.stderr.write(words)
                said = True
            if time.monotonic() > deadline:
                raise CommandError(f"{words} still, after {options['timeout']:.0f} s")
            time.sleep(RETRY_SECONDS)
