"""What the benchmarks app does on a worker's heartbeat (workbench.workers.signals): a pass of
its queue, after the runs' (their app is connected first); and when a benchmark ends, a pass soon
(lifecycle.benchmark_ended)."""

from django.dispatch import receiver

from workbench.benchmarks.lifecycle import benchmark_ended
from workbench.workers.signals import heartbeat


@receiver(heartbeat, dispatch_uid="benchmarks.schedule")
def schedule_benchmarks(sender, hostname: str, **kwargs) -> None:
    # Lazily, like the runs app: this module is imported by every process at start-up.
    from workbench.benchmarks.scheduling import benchmark_pass  # lazily: start-up cost

    benchmark_pass()


@receiver(benchmark_ended, dispatch_uid="benchmarks.schedule_freed_gpus")
def schedule_the_freed_gpus(sender, benchmark_id: int, **kwargs) -> None:
    from workbench.benchmarks.services import queue_scheduling  # lazily: start-up cost

    queue_scheduling()
