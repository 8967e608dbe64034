"""What the label checks do when the runs app below reports (it never imports this app): a run
that gave its devices back (lifecycle.devices_freed) may be a check's last fold, so its check is
brought up to date at once, not only when someone reads it. A check's failure is logged here and
never reaches the sender: the end of an attempt must go on whatever a check does."""

import logging

from django.dispatch import receiver

from workbench.labelchecks.models import LabelCheckFold
from workbench.labelchecks.services import label_check_refresh
from workbench.runs.lifecycle import devices_freed

log = logging.getLogger(__name__)


@receiver(devices_freed, dispatch_uid="labelchecks.follow_a_fold")
def follow_a_fold(sender, run_id: int, **kwargs) -> None:
    fold = LabelCheckFold.objects.filter(run_id=run_id).select_related("label_check").first()
    if fold is None:
        return
    try:
        label_check_refresh(check=fold.label_check)
    except Exception:
        log.exception("run %s: its label check could not be brought up to date", run_id)
