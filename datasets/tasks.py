from celery import shared_task

# The build itself, never datasets.services: services imports this module to queue builds.
from datasets.building import dataset_build
from datasets.doctor.checks import duplicates_run, duplicates_wanted_after_build
from workbench.workers.boot import BOOT_ID


@shared_task(bind=True, ignore_result=True)
def build_dataset(self, dataset_id: int) -> str:
    """Build one dataset; idempotent (the service claims the row, a duplicate does nothing)."""
    # Who builds it: the heartbeats of this worker process tell whether the build is still alive.
    status = dataset_build(dataset_id=dataset_id, worker=self.request.hostname or "", boot_id=BOOT_ID)
    # The leak report is on the dataset's page before anyone trains on it (datasets/doctor).
    if duplicates_wanted_after_build(dataset_id=dataset_id):
        check_duplicates.delay(dataset_id)
    return status


@shared_task(ignore_result=True)
def check_duplicates(dataset_id: int) -> None:
    """The dataset's duplicates report (datasets/doctor); idempotent: it rewrites the same one."""
    duplicates_run(dataset_id=dataset_id)
