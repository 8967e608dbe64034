from celery import shared_task

from workbench.runs import launcher, scheduler


@shared_task(acks_late=True)
def train_run(run_id: int, attempt: int) -> str:
    """Trains one attempt of a run on this worker (queued to this host's own queue)."""
    return launcher.run_attempt(run_id=run_id, attempt=attempt)


@shared_task
def schedule_runs() -> dict:
    return scheduler.schedule()
