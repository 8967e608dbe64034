"""What the workbench knows of Slurm without asking it: its job names, and what the Slurm
follower learnt at its last look (kept in the cache), for the pages and the selectors. The
follower (executors/slurm/follow.py) writes it; nothing here calls Slurm or starts anything."""

from __future__ import annotations

import re
import time

from django.conf import settings
from django.core.cache import cache

STATUS_KEY = "workbench:slurm-controller"
PARTITION_KEY = "workbench:slurm-partition"

_JOB_NAME = re.compile(r"^(?P<prefix>.+)-run(?P<run>\d+)-a(?P<attempt>\d+)$")


def job_name(run_id: int, attempt: int) -> str:
    return f"{settings.SLURM_JOB_PREFIX}-run{run_id}-a{attempt}"


def parse_job_name(name: str) -> tuple[int, int] | None:
    """(run id, first attempt) of one of this workbench's job names, else None."""
    match = _JOB_NAME.match(name)
    if match is None or match.group("prefix") != settings.SLURM_JOB_PREFIX:
        return None
    return int(match.group("run")), int(match.group("attempt"))


def controller_status() -> dict:
    """What the last control pass learnt: {"answers": bool, "message": str, "at": epoch seconds}
    ({} when no follower has looked yet)."""
    return cache.get(STATUS_KEY) or {}


def record_controller(answers: bool, message: str = "") -> None:
    cache.set(STATUS_KEY, {"answers": answers, "message": message, "at": time.time()}, timeout=3600)


def partition_snapshot() -> dict:
    """The partition as the GPUs page shows it: {"nodes": [...], "jobs": [...], "at": epoch
    seconds} as the follower last read it ({} before the first read)."""
    return cache.get(PARTITION_KEY) or {}


def record_partition(snapshot: dict) -> None:
    cache.set(PARTITION_KEY, {**snapshot, "at": time.time()}, timeout=3600)
