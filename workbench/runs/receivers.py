"""What the runs app does on a worker's housekeeping pass (workbench.workers.signals) and when a run
gives its devices back (lifecycle.devices_freed).

The scheduler and the local executor are imported when a signal arrives, not here: this module
is imported by every process at start-up (AppConfig.ready), and they pull in the Celery tasks,
the sampler and the Slurm follower, which web processes never use.
"""

from django.dispatch import receiver

from workbench.runs.lifecycle import devices_freed
from workbench.workers.signals import housekeeping, worker_stopping


@receiver(housekeeping, dispatch_uid="runs.schedule")
def schedule_the_queue(sender, hostname: str, **kwargs) -> None:
    # Every housekeeping pass of a worker schedules: runs of lost workers are reclaimed, waiting ones start.
    from workbench.runs.scheduler import schedule  # lazily: start-up cost, see the module's docstring

    schedule()


@receiver(devices_freed, dispatch_uid="runs.schedule_freed_devices")
def schedule_the_freed_devices(sender, run_id: int, **kwargs) -> None:
    from workbench.runs.services import queue_scheduling  # lazily: start-up cost, see the module's docstring

    queue_scheduling()


@receiver(worker_stopping, dispatch_uid="runs.stop_trainers_for_worker_exit")
def stop_trainers_with_a_checkpoint(sender, hostname: str, **kwargs) -> None:
    from workbench.runs.executors.local import stop_trainers_for_worker_exit  # lazily: start-up cost, see above

    stop_trainers_for_worker_exit()
