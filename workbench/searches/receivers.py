"""What the searches app does when the runs app below it reports (it never imports this app):

- a trial's run stored validation events (lifecycle.validation_stored): report them to Optuna,
  and prune the trial if its pruner says so (in the process that stores them, at once: the
  trainer is asked to stop within a second);
- a run gave its devices back (lifecycle.devices_freed): if it is a trial, a pass of its search
  (tell Optuna, start the next trial), queued as a task;
- every housekeeping pass of a worker (workers.signals.housekeeping): a pass of each running search, so one whose
  task was lost, or whose processes all restarted, carries on.

A search's failure is logged here and never reaches the sender: the ingest of a run, the end of
an attempt and the housekeeping must go on whatever a search does.
"""

import logging

from django.dispatch import receiver

from workbench.runs.lifecycle import devices_freed, validation_stored
from workbench.runs.models import Run
from workbench.searches.models import Search, Trial
from workbench.workers.signals import housekeeping

log = logging.getLogger(__name__)


@receiver(validation_stored, dispatch_uid="searches.report_validation")
def report_validation(sender, run_id: int, events, **kwargs) -> None:
    from workbench.searches.pruning import trial_report  # lazily: optuna loads only where trials run

    if not Trial.objects.filter(run_id=run_id, state=Trial.State.RUNNING).exists():
        return
    try:
        trial_report(run_id=run_id, events=events)
    except Exception:
        log.exception("run %s: could not report its validation to its search", run_id)


@receiver(devices_freed, dispatch_uid="searches.advance_after_a_trial")
def advance_after_a_trial(sender, run_id: int, **kwargs) -> None:
    from workbench.searches.services import queue_advance  # lazily: optuna loads only where trials run

    search_id = Trial.objects.filter(run_id=run_id).values_list("search_id", flat=True).first()
    if search_id is not None:
        queue_advance(search_id)


@receiver(housekeeping, dispatch_uid="searches.advance_running")
def advance_running_searches(sender, hostname: str, **kwargs) -> None:

    # Running searches, and paused or aborted ones whose trials' ends Optuna has not heard of yet.
    running = Search.objects.filter(state=Search.State.RUNNING)
    unsettled = Search.objects.filter(trials__state=Trial.State.RUNNING, trials__run__state__in=Run.FINISHED_STATES)
    ids = set(running.values_list("pk", flat=True)) | set(unsettled.values_list("pk", flat=True))
    if not ids:
        return
    from workbench.searches.services import search_advance  # lazily: optuna loads only where searches run

    for search_id in sorted(ids):
        try:
            search_advance(search_id=search_id)
        except Exception:
            log.exception("search %s: its pass failed", search_id)
