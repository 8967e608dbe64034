"""What the datasets app does on a worker's housekeeping pass (workbench.workers.signals)."""

from django.dispatch import receiver

from datasets.services import reclaim_lost_builds
from workbench.workers.signals import housekeeping


@receiver(housekeeping, dispatch_uid="datasets.reclaim_lost_builds")
def rebuild_datasets_of_lost_workers(sender, hostname: str, **kwargs) -> None:
    reclaim_lost_builds()
