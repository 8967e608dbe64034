"""`manage.py inference_job`: one classify/detect/segment-many or test job (GET
/api/inference/jobs/<id>/): its state, or with --wait its end; its results as a table or as the
API's JSON, and with --output its results.csv (or a zip with a segment job's masks)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from workbench.inference.management import common
from workbench.inference.models import InferenceJob


class Command(BaseCommand):
    help = "Show an inference job (predict or test_run without --wait); --wait follows it to its end."

    def add_arguments(self, parser):
        parser.add_argument("job_id", help="the job's id (printed by predict or test_run)")
        parser.add_argument("--wait", action="store_true", help="wait for the job to end")
        parser.add_argument("--timeout", type=float, default=3600, help="with --wait: give up after this (s)")
        parser.add_argument(
            "--output",
            type=Path,
            help="a many-images job's results.csv (a name ending .zip: with a segment job's masks)",
        )
        parser.add_argument("--format", choices=("table", "json"), default="table")
        parser.add_argument("--owner", help="username to act as (default: the job's owner); staff see any job")

    def handle(self, *args, **options):
        job = common.job_of(options["job_id"], options["owner"])
        output = common.writable(options["output"])
        if options["wait"]:
            job = common.wait_for_job(job, say=self.stderr.write, timeout=options["timeout"])
        self.stdout.write(common.job_text(job, as_json=options["format"] == "json"))
        if job.is_active:
            return
        if job.state != InferenceJob.State.DONE:
            raise CommandError(f"job {job.pk} failed: {job.error}")
        if output is not None:
            self.stderr.write(common.copy_job_results(job, output))
