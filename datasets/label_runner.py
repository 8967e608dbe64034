"""Where a source's labels are read: always in a child process under kernel limits
(datasets.label_child), for the wizard's and the API's label check, the CLI's, and the build.

Why a child and not a Celery task the request waits on: the check answers a person waiting at the
wizard, and a worker's queue may hold hours of builds and training ahead of it; a Celery worker
process also cannot be given per-task kernel limits without ending the worker. A child gets
RLIMIT_AS and RLIMIT_CPU of its own, dies with its parent (PR_SET_PDEATHSIG), and costs a
fraction of a second to start. The limits (settings.LABEL_READER_MEMORY_MB, _CPU_SECONDS, and the
interactive check's lower LABEL_CHECK_CPU_SECONDS) bound
what any file can cost; the per-format byte limits (datasets.labels.limits) refuse most hostile
files before they are parsed at all.
"""

from __future__ import annotations

import logging
import pickle
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from datasets.images import image_limits
from datasets.labels.common import LabelError
from workbench.workers.processes import ResourceLimits, start_child

log = logging.getLogger(__name__)

# What a label check may send back (the report keeps 1,000 problems; classes are names): past it
# the answer is refused rather than read into the web process.
MAX_CHECK_ANSWER_BYTES = 32 << 20
# What a build's plan may send back to the build worker: every image's path and boxes, or its
# polygons for COCO masks (COCO 2017 train's, the largest public set read, pickle to about 500 MB).
MAX_PLAN_ANSWER_BYTES = 1 << 30
# Wall time per CPU second allowed: a busy host may run the child at a fraction of a core.
WALL_PER_CPU = 3


class CheckTookTooLong(LabelError):
    """The interactive check passed its CPU time: no verdict on the source, which a build (with
    its larger limit) still reads in full. Callers may let the dataset be created."""


@dataclass(frozen=True)
class Reading:
    """One purpose of reading labels: what messages call it, its kernel limits and answer cap."""

    what: str
    limits: ResourceLimits
    max_answer: int
    interactive: bool = False  # a person waits: past its time it says the build will still read all


def check_reading() -> Reading:
    memory = settings.LABEL_READER_MEMORY_MB << 20
    limits = ResourceLimits(memory, settings.LABEL_CHECK_CPU_SECONDS)
    return Reading("a label check", limits, MAX_CHECK_ANSWER_BYTES, interactive=True)


def build_reading() -> Reading:
    memory = settings.LABEL_READER_MEMORY_MB << 20
    return Reading("a build", ResourceLimits(memory, settings.LABEL_READER_CPU_SECONDS), MAX_PLAN_ANSWER_BYTES)


def label_preview_bounded(**kwargs) -> dict:
    """datasets.preview.label_preview in the bounded child; LabelError names what was refused,
    CheckTookTooLong when only its time ran out."""
    return run_bounded("label_preview", kwargs, check_reading())


def annotated_plan_bounded(**kwargs):
    """datasets.labels.plan.annotated_plan in the bounded child (the build worker's path)."""
    return run_bounded("annotated_plan", kwargs, build_reading())


def run_bounded(call: str, kwargs: dict, reading: Reading):
    limits = reading.limits
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
            if child.returncode is not None and child.returncode > 0:
                raise LabelError(_internal_error(reading, log))
        if child.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
            raise _time_refusal(reading)
        if child.returncode != 0 or not result.is_file():
            # Out of memory outside Python's reach (a C library's allocation) ends the child by a signal.
            raise LabelError(_memory_text(reading))
        if result.stat().st_size > reading.max_answer:
            raise LabelError(
                f"the labels read for {reading.what} are over {_size_text(reading.max_answer)}: "
                "too many classes, files or shapes"
            )
        outcome, value = pickle.loads(result.read_bytes())  # written by our own child, for us alone
    if outcome == "memory":
        raise LabelError(_memory_text(reading))
    if outcome == "refused":
        raise LabelError(value)
    return value


def _wait(child: subprocess.Popen, limits: ResourceLimits) -> None:
    try:
        child.wait(timeout=limits.cpu_seconds * WALL_PER_CPU)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _internal_error(reading: Reading, log_file) -> str:
    """An exception the child did not expect (a reader's mistake, not the user's file being too
    large): its traceback goes to the server's log, the user reads that it was an internal error."""
    log_file.seek(0, 2)
    log_file.seek(max(0, log_file.tell() - 8000))
    log.error("%s: the label reader failed:\n%s", reading.what, log_file.read().decode("utf-8", "replace"))
    return f"the labels could not be read for {reading.what}: an internal error, written to the server's log"


def _size_text(size: int) -> str:
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size} bytes"


def _memory_text(reading: Reading) -> str:
    return (
        f"reading the labels needs more than the {reading.limits.memory_bytes >> 20} MiB of memory "
        f"{reading.what} may use: a label file or mask is too large or too complex"
    )


def _time_refusal(reading: Reading) -> LabelError:
    text = f"reading the labels took more than the {reading.limits.cpu_seconds} s of CPU time {reading.what} may take"
    if reading.interactive:
        return CheckTookTooLong(f"{text}: the source is large or slow to read; the build will still check every file")
    return LabelError(f"{text}: a label file or mask is too large or too complex")
