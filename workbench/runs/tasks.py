"""The runs app's Celery tasks. Imports run one way, services -> tasks -> executors and the
scheduler: what a task executes never imports the services that queue it."""

from celery import shared_task

from workbench.runs import scheduler
from workbench.runs.executors import local


@shared_task(acks_late=True)
def train_run(run_id: int, attempt: int) -> str:
    """Trains one attempt of a run on this worker (queued to this host's own queue by the
    scheduler, which sends it by name: scheduler.TRAIN_TASK)."""
    return local.run_attempt(run_id=run_id, attempt=attempt)


@shared_task
def schedule_runs() -> dict:
    return scheduler.schedule()
