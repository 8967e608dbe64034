"""Where a source's labels are read: always in a child process under kernel limits
(datasets.label_child), for the wizard's and the API's label check, the CLI's, and the build.

Why a child and not a Celery task the request waits on: the check answers a person waiting at the
wizard, and a worker's queue may hold hours of builds and training ahead of it; a Celery worker
process also cannot be given per-task kernel limits without ending the worker. A child gets
RLIMIT_AS and RLIMIT_CPU of its own, dies with its parent (PR_SET_PDEATHSIG), and costs a
fraction of a second to start. The limits (settings.LABEL_READER_MEMORY_MB, _CPU_SECONDS) bound
what any file can cost; the per-format byte limits (datasets.labels.limits) refuse most hostile
files before they are parsed at all.
"""

from __future__ import annotations

import pickle
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from django.conf import settings

from datasets.images import image_limits
from datasets.labels.common import LabelError
from workbench.workers.processes import ResourceLimits, start_child

# What a label check may send back (the report keeps 1,000 problems; classes are names): past it
# the answer is refused rather than read into the web process.
MAX_CHECK_ANSWER_BYTES = 32 << 20
# Wall time per CPU second allowed: a busy host may run the child at a fraction of a core.
WALL_PER_CPU = 3


def reader_limits() -> ResourceLimits:
    return ResourceLimits(
        memory_bytes=settings.LABEL_READER_MEMORY_MB << 20, cpu_seconds=settings.LABEL_READER_CPU_SECONDS
    )


def label_preview_bounded(**kwargs) -> dict:
    """datasets.preview.label_preview in the bounded child; LabelError names what was refused."""
    return run_bounded("label_preview", kwargs, max_answer=MAX_CHECK_ANSWER_BYTES)


def annotated_plan_bounded(**kwargs):
    """datasets.labels.plan.annotated_plan in the bounded child (the build worker's path)."""
    return run_bounded("annotated_plan", kwargs, max_answer=None)


def run_bounded(call: str, kwargs: dict, *, max_answer: int | None):
    limits = reader_limits()
    with tempfile.TemporaryDirectory(prefix="label-child-") as folder:
        request, result = Path(folder) / "request", Path(folder) / "result"
        request.write_bytes(pickle.dumps({"call": call, "kwargs": kwargs, "image_limits": image_limits()}))
        with open(Path(folder) / "log", "w+b") as log:
            child = start_child(
                [sys.executable, "-m", "datasets.label_child", str(request), str(result)],
                stdout=log,
                env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
                own_session=True,
                limits=limits,
            )
            _wait(child, limits)
        if child.returncode != 0 or not result.is_file():
            raise LabelError(_ended_text(child.returncode, limits))
        if max_answer is not None and result.stat().st_size > max_answer:
            raise LabelError(f"the label check's answer is over {max_answer >> 20} MiB: too many classes or files")
        outcome, value = pickle.loads(result.read_bytes())  # written by our own child, for us alone
    if outcome == "memory":
        raise LabelError(_memory_text(limits))
    if outcome == "refused":
        raise LabelError(value)
    return value


def _wait(child: subprocess.Popen, limits: ResourceLimits) -> None:
    try:
        child.wait(timeout=limits.cpu_seconds * WALL_PER_CPU)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _memory_text(limits: ResourceLimits) -> str:
    return (
        f"reading the labels needs more than the {limits.memory_bytes >> 20} MiB of memory a label check may use: "
        "a label file or mask is too large or too complex"
    )


def _ended_text(returncode: int | None, limits: ResourceLimits) -> str:
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return f"reading the labels took more than the {limits.cpu_seconds} s a label check may take"
    # Out of memory outside Python's reach (a C library's allocation) ends the child by a signal.
    return _memory_text(limits)
