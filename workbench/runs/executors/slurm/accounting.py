"""The GPU-hours of Slurm runs from the cluster's own accounting.

When a Slurm run stops running, the ledger (projects.GpuUsage) gets the stretch as the follower
saw it: from the poll that found the job running to the poll that found it ended, times the
GPUs asked for. That estimate is off by a poll at each end and blind to what Slurm really
allocated, so once sacct has the job's records (elapsed x AllocTRES gres/gpu, every time a
requeued job ran) they replace it, charged to the same owner and project. A cluster without
accounting keeps the estimate as the workbench's own measure; so does a job sacct never
recorded within a day.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from django.utils import timezone

from workbench.projects.quotas import Allocation, estimated_slurm_jobs, settle_from_sacct
from workbench.slurm import commands

log = logging.getLogger(__name__)

SETTLE_SECONDS = 5.0  # how often the follower asks sacct about ended jobs
# How long a job's estimate waits for sacct's record (slurmdbd down, a job it lost) before it
# stays as the workbench measured it.
GIVE_UP_AFTER = timedelta(days=1)
# A job's sacct record starts before the follower's poll sees it running, by a poll or so.
SAME_JOB_SLACK = timedelta(minutes=10)
_last_pass = 0.0


def settle_pass() -> int:
    """Asks sacct about the ended Slurm jobs the ledger holds as estimates; returns how many it
    settled. Called by the follower's control thread; at most every SETTLE_SECONDS."""
    global _last_pass
    if time.monotonic() - _last_pass < SETTLE_SECONDS:
        return 0
    _last_pass = time.monotonic()
    estimated = estimated_slurm_jobs()
    if not estimated:
        return 0
    records = commands.allocations(estimated)
    if records is None:
        log.info("no Slurm accounting: the GPU-hours of %d jobs stay as the workbench saw them", len(estimated))
    settled = 0
    for job_id, (first_seen, last_seen) in estimated.items():
        allocations = None if records is None else _ended(records.get(job_id, []), since=first_seen)
        if allocations is None and records is not None and timezone.now() - last_seen < GIVE_UP_AFTER:
            continue  # still running, or not in sacct yet: ask again next time
        settle_from_sacct(slurm_job_id=job_id, allocations=allocations)
        settled += 1
    return settled


def _ended(records: list[commands.Allocation], *, since: datetime) -> list[Allocation] | None:
    """sacct's records of this job as the ledger's, once every one has ended; None before."""
    # --duplicates also lists an older job of the same id (ids start again when a cluster's
    # state is wiped): what ended well before the follower first saw this one is not it.
    records = [record for record in records if record.end is None or record.end > since - SAME_JOB_SLACK]
    # A running or pending record has no end yet; a requeued job's earlier ones (state REQUEUED) have.
    if not records or any(record.end is None for record in records):
        return None
    return [Allocation(start=r.start or r.end, end=r.end, gpus=r.gpus) for r in records]
