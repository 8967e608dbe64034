from celery import shared_task

from workbench.inference import exports, services
from workbench.workers.boot import BOOT_ID


@shared_task(ignore_result=True)
def run_inference_job(job_id: int) -> str:
    """Classify-many or test job; claims its row, so a duplicate delivery does nothing."""
    return services.job_run(job_id=job_id)


@shared_task(bind=True, ignore_result=True)
def build_export(self, run_id: int, fmt: str, checkpoint: str) -> str:
    """Builds one export's zip; a duplicate finds it built (or waits on the same lock)."""
    # Who builds it: if this worker process is lost, the next request queues the build again.
    return exports.export_build(
        run_id=run_id, fmt=fmt, checkpoint=checkpoint, worker=self.request.hostname or "", boot_id=BOOT_ID
    )
