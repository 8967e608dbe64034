"""What the benchmarks app does when a benchmark ends (lifecycle.benchmark_ended): a pass of the
one queue soon, since its GPUs are free. Heartbeats need nothing of this app: the runs' pass on
every beat walks benchmarks too (scheduling.py is their kind of job)."""

from django.dispatch import receiver

from workbench.benchmarks.lifecycle import benchmark_ended


@receiver(benchmark_ended, dispatch_uid="benchmarks.schedule_freed_gpus")
def schedule_the_freed_gpus(sender, benchmark_id: int, **kwargs) -> None:
    from workbench.benchmarks.services import queue_scheduling  # lazily: start-up cost

    queue_scheduling()
