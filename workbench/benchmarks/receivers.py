"""What the benchmarks app does on a worker's heartbeat (workbench.workers.signals): a pass of
its queue, after the runs' (their app is connected first)."""

from django.dispatch import receiver

from workbench.workers.signals import heartbeat


@receiver(heartbeat, dispatch_uid="benchmarks.schedule")
def schedule_benchmarks(sender, hostname: str, **kwargs) -> None:
    # Lazily, like the runs app: this module is imported by every process at start-up.
    from workbench.benchmarks.scheduling import benchmark_pass  # lazily: start-up cost

    benchmark_pass()
