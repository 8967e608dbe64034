from celery import shared_task

# The build itself, never datasets.services: services imports this module to queue builds.
from datasets.building import dataset_build
from datasets.doctor.checks import duplicates_run
from workbench.workers.boot import BOOT_ID


@shared_task(bind=True, ignore_result=True)
def build_dataset(self, dataset_id: int) -> str:
    """Build one dataset; idempotent (the service claims the row, a duplicate does nothing)."""
    # Who builds it: the heartbeats of this worker process tell whether the build is still alive.
    return dataset_build(dataset_id=dataset_id, worker=self.request.hostname or "", boot_id=BOOT_ID)


@shared_task(ignore_result=True)
def check_duplicates(dataset_id: int) -> None:
    """The dataset's duplicates report (datasets/doctor); idempotent: it rewrites the same one."""
    duplicates_run(dataset_id=dataset_id)
