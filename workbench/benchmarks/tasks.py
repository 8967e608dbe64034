from celery import shared_task

from workbench.benchmarks import runner


@shared_task(acks_late=True)
def run_benchmark(benchmark_id: int) -> str:
    """Measures one benchmark on this worker (queued to this host's own queue by the one queue's
    pass, which sends it by name: scheduling.RUN_TASK)."""
    return runner.run_job(benchmark_id=benchmark_id)
