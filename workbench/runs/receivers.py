"""What the runs app does on a worker's heartbeat (workbench.workers.signals).

The launcher and the scheduler are imported when a signal arrives, not here: this module is
imported by every process at start-up (AppConfig.ready), and the launcher imports torch, which
costs web processes seconds and hundreds of MB they never use.
"""

from django.dispatch import receiver

from workbench.workers.signals import heartbeat, worker_stopping


@receiver(heartbeat, dispatch_uid="runs.schedule")
def schedule_the_queue(sender, hostname: str, **kwargs) -> None:
    # Every beat of every worker runs a pass: runs of lost workers are reclaimed, waiting ones start.
    from workbench.runs.scheduler import schedule  # lazily: see the module's docstring

    schedule()


@receiver(worker_stopping, dispatch_uid="runs.stop_trainers_for_worker_exit")
def stop_trainers_with_a_checkpoint(sender, hostname: str, **kwargs) -> None:
    from workbench.runs.launcher import stop_trainers_for_worker_exit  # lazily: see the module's docstring

    stop_trainers_for_worker_exit()
