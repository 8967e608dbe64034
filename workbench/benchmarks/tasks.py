from celery import shared_task

from workbench.benchmarks import runner, scheduling


@shared_task(acks_late=True)
def run_benchmark(benchmark_id: int) -> str:
    """Measures one benchmark on this worker (queued to this host's own queue)."""
    return runner.run_job(benchmark_id=benchmark_id)


@shared_task
def schedule_benchmarks() -> dict:
    return scheduling.benchmark_pass()
