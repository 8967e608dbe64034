"""The searches app's Celery task: one pass of a search (services.search_advance)."""

from celery import shared_task

from workbench.searches import services


@shared_task
def advance_search(search_id: int) -> str | None:
    search = services.search_advance(search_id=search_id)
    return None if search is None else search.state
