from celery import shared_task

from workbench.inference import services


@shared_task(ignore_result=True)
def run_inference_job(job_id: int) -> str:
    """Classify-many or test job; claims its row, so a duplicate delivery does nothing."""
    return services.job_run(job_id=job_id)
