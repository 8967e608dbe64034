"""The workbench's whole interface to Slurm: its command line tools, run with a timeout.

sbatch --parsable, squeue, sacct, scancel, sinfo and scontrol are Slurm's stable interface (the
same on 22.05 and later), they find the cluster through SLURM_CONF like any user's shell, and
they need no library matched to the cluster's version. Output is read in fixed, delimited
formats. A controller that does not answer raises SlurmUnavailable (callers keep their state
and try again); a request Slurm refuses raises SlurmError with Slurm's own words.
"""

from __future__ import annotations

import getpass
import logging
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone

log = logging.getLogger(__name__)

# Slurm states in which a job still holds or waits for resources.
ACTIVE_STATES = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"}
    | {"RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
)
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT"})
# A start estimate this far out is Slurm's way of saying "when a job without a time limit ends".
HORIZON = timedelta(days=60)

# squeue's controller-down words (the tool exits 1 with them after its retries).
_UNREACHABLE = ("unable to contact slurm controller", "connection refused", "socket timed out", "zero bytes")


class SlurmUnavailable(RuntimeError):
    """The controller does not answer, or Slurm's tools are missing here."""


class SlurmError(RuntimeError):
    """Slurm refused a request; the message is Slurm's."""


@dataclass(frozen=True)
class Job:
    job_id: str
    name: str
    state: str  # Slurm's base state: PENDING, RUNNING, COMPLETED, CANCELLED, NODE_FAIL...
    reason: str  # why it pends (Resources, Priority...) or why it ended; "" for None
    start: datetime | None  # actual start, or the estimate while pending (None if none)
    nodes: str  # the node list it runs on
    restarts: int  # times Slurm requeued it
    exit_code: str = ""  # "code:signal", from sacct only

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def is_running(self) -> bool:
        return self.state in RUNNING_STATES


@dataclass(frozen=True)
class Node:
    name: str
    state: str  # idle, mixed, allocated, drained, down...
    gpus: int
    gpus_used: int
    cpus: str  # allocated/idle/other/total
    reason: str


def run_tool(argv: list[str], *, timeout: float | None = None) -> str:
    """stdout of a Slurm tool; SlurmUnavailable or SlurmError with Slurm's first line of stderr."""
    try:
        # TZ=UTC: Slurm prints times in the local zone of the process, which need not be the
        # workbench's; in UTC they are read without knowing the machine's zone.
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout or settings.SLURM_COMMAND_TIMEOUT_SECONDS,
            env={**os.environ, "TZ": "UTC"},
        )  # fmt: skip
    except FileNotFoundError:
        raise SlurmUnavailable(f"Slurm's {argv[0]} is not installed on this worker") from None
    except subprocess.TimeoutExpired:
        raise SlurmUnavailable(
            f"Slurm's {argv[0]} did not answer within {timeout or settings.SLURM_COMMAND_TIMEOUT_SECONDS:g} s"
        ) from None
    if done.returncode != 0:
        message = (done.stderr.strip() or done.stdout.strip() or f"exit code {done.returncode}").splitlines()[0]
        message = message.removeprefix(f"{argv[0]}: ").removeprefix("error: ")
        if any(words in message.lower() for words in _UNREACHABLE):
            raise SlurmUnavailable(f"the Slurm controller does not answer ({message})")
        raise SlurmError(message)
    return done.stdout


def _rows(text: str, fields: int) -> Iterable[list[str]]:
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) >= fields:
            yield [part.strip() for part in parts[:fields]]


def _time(text: str) -> datetime | None:
    if not text or text in ("N/A", "Unknown", "None"):
        return None
    try:
        moment = datetime.fromisoformat(text).replace(tzinfo=UTC)
    except ValueError:
        return None
    return None if moment - timezone.now() > HORIZON else moment


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


# ------------------------------------------------------------------------------- jobs


def submit(script: Path, *, options: list[str]) -> str:
    """sbatch; the new job's id."""
    out = run_tool(["sbatch", "--parsable", *options, str(script)])
    return out.strip().split(";")[0]  # "<id>[;<cluster>]"


_SQUEUE_FIELDS = ("JobID", "Name", "State", "Reason", "StartTime", "NodeList", "RestartCnt")


def jobs(*, name_prefix: str) -> dict[str, Job]:
    """This account's jobs that squeue still knows (running, pending, and recently ended), by id,
    whose names start with `name_prefix`."""
    fmt = ",".join(f"{field}:|" for field in _SQUEUE_FIELDS)
    out = run_tool(["squeue", "--noheader", "--states=all", f"--user={getpass.getuser()}", f"--Format={fmt}"])
    found = {}
    for job_id, name, state, reason, start, nodes, restarts in _rows(out, len(_SQUEUE_FIELDS)):
        if name.startswith(name_prefix):
            reason = "" if reason in ("None", "(null)") else reason
            found[job_id] = Job(job_id, name, state.split()[0], reason, _time(start), nodes, _int(restarts))
    return found


def accounting(job_ids: Iterable[str]) -> dict[str, Job]:
    """sacct's record of jobs squeue has forgotten; {} where the cluster keeps no accounting."""
    ids = ",".join(sorted(set(job_ids)))
    if not ids:
        return {}
    try:
        out = run_tool(
            ["sacct", "--noheader", "--parsable2", "--allocations", f"--jobs={ids}"]
            + ["--format=JobID,JobName,State,Reason,Start,NodeList,ExitCode"]
        )
    except SlurmError as error:  # "Slurm accounting storage is disabled"
        log.debug("sacct: %s", error)
        return {}
    found = {}
    for job_id, name, state, reason, start, nodes, exit_code in _rows(out, 7):
        # "CANCELLED by 0": the state's first word; the rest is who.
        reason = "" if reason in ("None", "") else reason
        found[job_id] = Job(job_id, name, state.split()[0], reason, _time(start), nodes, 0, exit_code)
    return found


@dataclass(frozen=True)
class Allocation:
    """One of sacct's records of a job: a job Slurm requeued has one per time it ran."""

    job_id: str
    state: str
    start: datetime | None
    end: datetime | None  # None while it runs
    elapsed_seconds: int
    gpus: int | None  # AllocTRES's gres/gpu; None where the cluster does not account GPUs


def allocations(job_ids: Iterable[str]) -> dict[str, list[Allocation]] | None:
    """sacct's records of the jobs' allocations, every time each ran (--duplicates), by job id;
    None where the cluster keeps no accounting, {} while its accounting does not answer. GPUs
    are counted where slurm.conf's AccountingStorageTRES names gres/gpu."""
    ids = ",".join(sorted(set(job_ids)))
    if not ids:
        return {}
    try:
        out = run_tool(
            ["sacct", "--noheader", "--parsable2", "--allocations", "--duplicates", f"--jobs={ids}"]
            + ["--format=JobID,State,Start,End,ElapsedRaw,AllocTRES"]
        )
    except (SlurmError, SlurmUnavailable) as error:
        if isinstance(error, SlurmError) and "disabled" in str(error).lower():  # "accounting storage is disabled"
            return None
        # slurmdbd or its database down ("connection refused" is not the controller's here):
        # nothing is known now, and nothing is decided on it; the controller may be fine.
        log.warning("sacct: %s", error)
        return {}
    found: dict[str, list[Allocation]] = {}
    for job_id, state, start, end, elapsed, tres in _rows(out, 6):
        gpus = None
        for item in tres.split(","):
            name, _, count = item.partition("=")
            if name == "gres/gpu" and count.isdigit():
                gpus = int(count)
        found.setdefault(job_id, []).append(
            Allocation(job_id, state.split()[0], _time(start), _time(end), _int(elapsed), gpus)
        )
    return found


def signal_job(job_id: str, signal_name: str) -> None:
    """Sends a signal to every task of the job's steps (the trainers), not to the batch shell."""
    run_tool(["scancel", f"--signal={signal_name}", job_id])


def cancel(job_id: str) -> None:
    run_tool(["scancel", job_id])


# ------------------------------------------------------------------------------- the cluster


def partition_nodes(partition: str) -> list[Node]:
    out = run_tool(
        ["sinfo", "--noheader", "--Node", f"--partition={partition}"]
        + ["--Format=NodeList:|,StateLong:|,Gres:|,GresUsed:|,CPUsState:|,Reason:|"]
    )
    nodes = {}
    for name, state, gres, used, cpus, reason in _rows(out, 6):
        nodes[name] = Node(name, state, gpu_count(gres), gpu_count(used), cpus, "" if reason == "none" else reason)
    return list(nodes.values())


def gpu_count(gres: str) -> int:
    """GPUs in a GRES string: "gpu:2", "gpu:a100:4(S:0-1)", "gpu:2,shard:8" -> 2, 4, 2."""
    total = 0
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu" and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def running_jobs(partition: str) -> list[tuple[str, str, str, str]]:
    """(job id, name, user, node list) of every job running in the partition, anyone's."""
    out = run_tool(
        ["squeue", "--noheader", "--states=RUNNING", f"--partition={partition}"]
        + ["--Format=JobID:|,Name:|,UserName:|,NodeList:|"]
    )
    return [tuple(row) for row in _rows(out, 4)]


def controller_answers() -> bool:
    try:
        return "UP" in run_tool(["scontrol", "ping"], timeout=min(10.0, settings.SLURM_COMMAND_TIMEOUT_SECONDS))
    except (SlurmUnavailable, SlurmError):
        return False


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed node lists: "n[1-3,7],gpu01" -> n1, n2, n3, n7, gpu01 (zero padding kept)."""
    names: list[str] = []
    depth, start = 0, 0
    parts = []
    for index, char in enumerate(text):  # split on the commas outside brackets
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    for part in filter(None, (p.strip() for p in parts)):
        if "[" not in part:
            names.append(part)
            continue
        prefix, _, rest = part.partition("[")
        ranges, _, suffix = rest.partition("]")
        for item in ranges.split(","):
            low, _, high = item.partition("-")
            width = len(low)
            for number in range(int(low), int(high or low) + 1):
                names.append(f"{prefix}{number:0{width}d}{suffix}")
    return names
