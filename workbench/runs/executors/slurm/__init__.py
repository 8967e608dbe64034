"""The Slurm executor: a run's attempt as a batch job on the lab's cluster (`jobs.py`), brought in
line with what Slurm says on every pass (`reconcile.py`) by the follower (`follow.py`)."""

from __future__ import annotations

from django.conf import settings

from workbench.core.errors import RequestError
from workbench.runs.devices import DeviceRequest
from workbench.runs.executors.slurm import jobs
from workbench.runs.models import Run


class SlurmExecutor:
    name = Run.Executor.SLURM
    submitted_words = "submitted to Slurm"
    has_gpus_for_auto = True  # "auto" is one GPU: the cluster has them, or sbatch says it has none
    knows_device_memory = False  # Slurm chooses the nodes; their GPUs' memory is not known before

    def check_request(self, *, request: DeviceRequest, nodes: int) -> None:
        if not settings.SLURM_ENABLED:
            raise RequestError("executor", "Slurm is not enabled on this workbench; use local")
        if request.is_specific:
            raise RequestError("gpus", "Slurm chooses the GPUs; ask for a number of GPUs per node, or cpu")

    def holds(self, run: Run) -> bool:
        # A job of the run is in Slurm (pending or running): the follower signals or cancels it.
        return run.state == Run.State.RUNNING or (run.has_live_slurm_job and run.state in Run.PENDING_STATES)

    def placement_preview(self, *, user, request: DeviceRequest, nodes: int) -> dict:
        return jobs.placement_preview(request, nodes)
