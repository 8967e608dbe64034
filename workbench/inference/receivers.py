"""What the inference app does on a worker's housekeeping pass, and when a job row is deleted.

Services are imported when a signal arrives: this module is imported by every process at
start-up (AppConfig.ready), and the services import torch, which web processes never need.
"""

import shutil

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from workbench.inference.models import InferenceJob
from workbench.workers.signals import housekeeping


@receiver(housekeeping, dispatch_uid="inference.jobs_fail_stale")
def fail_jobs_that_stopped_reporting(sender, hostname: str, **kwargs) -> None:
    from workbench.inference.services import jobs_fail_stale  # lazily: see the module's docstring

    jobs_fail_stale()


@receiver(post_delete, sender=InferenceJob, dispatch_uid="inference.remove_job_files")
def remove_job_files(sender, instance: InferenceJob, **kwargs) -> None:
    """A job's files go with its row, however it is deleted (the job alone, or its run by cascade),
    and only once the deletion is committed."""
    folder = instance.folder
    transaction.on_commit(lambda: shutil.rmtree(folder, ignore_errors=True))
