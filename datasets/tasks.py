from celery import shared_task

from datasets.services import dataset_build


@shared_task(ignore_result=True)
def build_dataset(dataset_id: int) -> str:
    """Build one dataset; idempotent (the service claims the row, a duplicate does nothing)."""
    return dataset_build(dataset_id=dataset_id)
