"""The one table from how an attempt ended to what the run does next, for every executor and for
benchmarks. Each executor only says what it saw (`Ending`); the order of the checks is decided
here, once, and tests/workbench/runs/test_outcome.py holds it as a table.

The order, and why:
1. The trainer finished (exit 0): done, even if an abort or pause came meanwhile. The work is
   complete and its model kept; throwing it away for a stop that arrived too late helps nobody.
2. An abort was asked for: aborted, however the trainer went (stopped, killed after the grace,
   failed on its way out, its job cancelled).
3. A pause was asked for and the trainer stopped (with its checkpoint), was killed, or left no
   report: paused. A trainer that failed for its own reason while pausing fails instead (step 4):
   resuming it would fail the same way.
3b. Its search pruned it and the trainer stopped (with its checkpoint), was killed, or left no
   report: pruned, in the pruner's words (Run.stop_reason). A trainer that failed on its own
   while being pruned fails (step 4), as for a pause.
4. The trainer failed for its own reason (config, OOM, NaN, an error): failed, not retried, since
   the same config on the same data fails the same way.
5. The executor lost it (Slurm: NODE_FAIL, PREEMPTED, BOOT_FAIL; a job nobody saw end):
   interrupted, and it resumes from its checkpoint.
6. Cancelled from outside the workbench (scancel): aborted, with Slurm's words.
7. Any other end the executor names (TIMEOUT, OUT_OF_MEMORY, FAILED, COMPLETED with no report):
   failed, with its words. A job that reaches its time limit would reach it again.
8. Locally, a trainer stopped by a signal nobody asked for (the worker shutting down, the OOM
   killer) or an exit code the protocol does not know: interrupted, and it resumes.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer import protocol
from workbench.runs.lifecycle import interrupt, run_finish
from workbench.runs.models import Run
from workbench.slurm import words

# Executor end states after which the attempt resumes on a new job (bounded by RUN_MAX_ATTEMPTS).
LOST = "LOST"  # a job that ended while nobody followed it: what it wrote is all there is
RESUMABLE_ENDS = {"NODE_FAIL", "PREEMPTED", "BOOT_FAIL", LOST}
CANCELLED = "CANCELLED"


@dataclass(frozen=True)
class Ending:
    """What an executor saw of an attempt's end."""

    exit_code: int | None  # the trainer's (negative: killed by that signal); None: it left no report
    stop_request: str = ""  # Run.StopRequest: what the workbench had asked for
    message: str = ""  # the trainer's final status message
    end_state: str = ""  # the executor's own end state (Slurm's job state); "" for a local process
    where: str = ""  # appended to the executor's words: "job 12"


@dataclass(frozen=True)
class Outcome:
    state: str  # a Run.State: done, failed, aborted, paused, pruned or interrupted
    reason: str


def decide(ending: Ending) -> Outcome:
    code, request = ending.exit_code, ending.stop_request
    suffix = f" ({ending.where})" if ending.where else ""
    if code == protocol.EXIT_DONE:
        return Outcome(Run.State.DONE, ending.message or "finished")
    if request == Run.StopRequest.ABORT:
        return Outcome(Run.State.ABORTED, "aborted by the user")
    stopped = code is None or code == protocol.EXIT_STOPPED or code < 0
    if request == Run.StopRequest.PAUSE and stopped:
        return Outcome(Run.State.PAUSED, "paused by the user; resume continues from the checkpoint")
    if request == Run.StopRequest.PRUNE and stopped:
        return Outcome(Run.State.PRUNED, "pruned by its search")
    if code in protocol.FAILURE_REASONS:
        return Outcome(Run.State.FAILED, ending.message or protocol.FAILURE_REASONS[code])
    if ending.end_state in RESUMABLE_ENDS:
        lost = "its job ended while nobody followed it"
        return Outcome(
            Run.State.INTERRUPTED, (lost if ending.end_state == LOST else words.end_words(ending.end_state)) + suffix
        )
    if ending.end_state == CANCELLED:
        return Outcome(Run.State.ABORTED, words.end_words(CANCELLED) + suffix)
    if ending.end_state:
        report = "" if code is not None else " without a final report"
        return Outcome(Run.State.FAILED, f"{words.end_words(ending.end_state)}{suffix}{report}")
    signalled = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    return Outcome(Run.State.INTERRUPTED, f"the trainer was stopped ({signalled})")


def end_attempt(run: Run, outcome: Outcome) -> str:
    """Carries the outcome out: the run ends (or pauses), or is interrupted by the lifecycle's
    rule (resume, or fail after RUN_MAX_ATTEMPTS). Returns the state decided."""
    run.refresh_from_db()
    if outcome.state == Run.State.INTERRUPTED:
        interrupt(run, outcome.reason)
    else:
        # A prune's words (rung, value, the trials it lost to) are the search's, kept on the run.
        reason = (run.stop_reason or outcome.reason) if outcome.state == Run.State.PRUNED else outcome.reason
        run_finish(run=run, to_state=outcome.state, reason=reason, from_states=Run.ACTIVE_STATES)
    return outcome.state
