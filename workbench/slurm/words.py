"""Slurm's pending reasons and job states in plain words, for the queue and the run page."""

from __future__ import annotations

# squeue's reason codes (man squeue, "JOB REASON CODES"), the ones users meet.
PENDING_REASONS = {
    "Resources": "waiting for the GPUs or nodes it asked for to free up",
    "Priority": "other jobs of higher priority are ahead of it",
    "Dependency": "waiting for a job it depends on",
    "BeginTime": "waiting for its start time (a requeued job waits a little before it may start again)",
    "JobHeldUser": "held by its owner",
    "JobHeldAdmin": "held by an administrator",
    "PartitionDown": "its partition is down",
    "PartitionInactive": "its partition is inactive",
    "PartitionNodeLimit": "asks for more nodes than the partition allows",
    "PartitionTimeLimit": "asks for more time than the partition allows",
    "ReqNodeNotAvail": "a node it needs is not available (down, drained or reserved)",
    "NodeDown": "a node it needs is down",
    "Reservation": "waiting for its reservation",
    "AssocGrpGRES": "its account is at its GPU limit",
    "AssocGrpCpuLimit": "its account is at its CPU limit",
    "AssocGrpJobsLimit": "its account is at its limit of running jobs",
    "AssocMaxJobsLimit": "its account is at its limit of running jobs",
    "QOSMaxGRESPerUser": "a QOS limit: you are at your GPU limit",
    "QOSGrpGRES": "a QOS limit: the QOS is at its GPU limit",
    "QOSMaxJobsPerUserLimit": "a QOS limit: you are at your limit of running jobs",
    "QOSGrpCpuLimit": "a QOS limit: the QOS is at its CPU limit",
    "QOSMaxWallDurationPerJobLimit": "a QOS limit: it asks for more time than its QOS allows",
    "launch failed requeued held": "its launch failed; an administrator must release it",
}

# Ends the workbench did not ask for, as words for the run's timeline.
END_STATES = {
    "CANCELLED": "cancelled in Slurm (scancel, by an administrator or the job's account)",
    "NODE_FAIL": "a node of the job failed (NODE_FAIL)",
    "TIMEOUT": "the job reached its time limit (TIMEOUT)",
    "PREEMPTED": "the job was preempted by Slurm (PREEMPTED)",
    "BOOT_FAIL": "a node of the job failed to boot (BOOT_FAIL)",
    "OUT_OF_MEMORY": "the job ran out of host memory (OUT_OF_MEMORY)",
    "DEADLINE": "the job reached its deadline (DEADLINE)",
    "FAILED": "the job failed",
    "COMPLETED": "the job ended",
}


def pending_words(reason: str) -> str:
    """'Resources' -> 'waiting for ... (Resources)'; a code we do not know is shown as Slurm says it."""
    if not reason or reason == "None":
        return "waiting for Slurm to start it"
    for code, words in PENDING_REASONS.items():
        if reason == code or reason.startswith(code):
            return f"{words} (Slurm: {reason})"
    return f"Slurm: {reason}"


def end_words(state: str) -> str:
    return END_STATES.get(state, f"the job ended {state}")
