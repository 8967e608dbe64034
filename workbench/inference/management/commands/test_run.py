"""`manage.py test_run`: the run's Test page from the command line: a test job on its dataset's
validation or test split (POST /api/runs/<id>/test/, the same service), followed with --wait and
printed as a table or as the API's JSON: top-1/top-5, per-class precision and recall and the
confusion matrix of a classifier; mAP, mAP50, mAP75 and per-class AP of a detector; mIoU, pixel
accuracy, Dice and per-class IoU of a segmentation network."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from workbench.core.adapters import command_error
from workbench.core.commands import require_running_workbench
from workbench.inference import services
from workbench.inference.management import common
from workbench.inference.models import InferenceJob


class Command(BaseCommand):
    help = (
        "Test a run's checkpoint on its dataset's test (or validation) split; prints the job id, or with --wait "
        "its measures."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", help="the run's id")
        parser.add_argument("--checkpoint", default="best", help="best | last | a step number (default best)")
        parser.add_argument(
            "--source", choices=("test", "val"), help="the split (default: test when the dataset has one, else val)"
        )
        parser.add_argument("--wait", action="store_true", help="wait for the job and print its measures")
        parser.add_argument("--timeout", type=float, default=3600, help="with --wait: give up after this (s)")
        parser.add_argument("--format", choices=("table", "json"), default="table")
        common.add_owner_argument(parser)

    def handle(self, *args, **options):
        run, user = common.run_of(options["run_id"], options["owner"])
        source = options["source"] or ("test" if (run.dataset.splits or {}).get("test", {}).get("count") else "val")
        require_running_workbench()  # before the job exists: a job no worker hears would wait forever
        try:
            job = services.job_create(
                owner=user, run=run, kind=InferenceJob.Kind.TEST, checkpoint=options["checkpoint"], source=source
            )
        except services.InferenceError as error:
            raise command_error(error) from None
        common.report_job(self, job, options)
