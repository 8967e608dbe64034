"""The notices app's Celery task: send a new notice's deliveries at once (services.deliver_due)."""

from celery import shared_task

from workbench.notices import services


@shared_task
def deliver_notice(notice_id: int) -> int:
    return services.deliver_due(notice_id=notice_id)
