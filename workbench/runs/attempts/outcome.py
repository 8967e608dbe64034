"""The one table from how an attempt ended to what the run does next, for every executor and for
benchmarks. Each executor only says what it saw (`Ending`); the order of the checks is decided
here, once, and tests/workbench/runs/attempts/test_outcome.py holds it as a table.

The order, and why:
0. The attempt no longer owns its run (a newer attempt runs it, or it was ended or interrupted
   while this one still watched): nothing. Only the attempt that owns the run decides its end; a
   stale one deciding would end a healthy run (as "aborted by the user", nobody having asked) and
   stop the trainer of the attempt that does own it.
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

What a stop request becomes is one table too (STOPPED_BY): an attempt that stopped for it, a run
interrupted while it was pending (`interrupt`), and a run stopped before its trainer started
(gates.stop_gate) all read it. Only a request makes a stop the user's; nothing the system did is
put in the user's words.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from trainer import protocol
from workbench.runs.lifecycle import run_finish
from workbench.runs.models import Run
from workbench.slurm import words

# Executor end states after which the attempt resumes on a new job (bounded by RUN_MAX_ATTEMPTS).
LOST = "LOST"  # a job that ended while nobody followed it: what it wrote is all there is
RESUMABLE_ENDS = {"NODE_FAIL", "PREEMPTED", "BOOT_FAIL", LOST}
CANCELLED = "CANCELLED"
# The outcome of an attempt that no longer owns its run (row 0): it changes nothing.
SUPERSEDED = "superseded"

# A stop request -> the state the run takes once its trainer stopped for it, and the words.
STOPPED_BY = {
    Run.StopRequest.ABORT: (Run.State.ABORTED, "aborted by the user"),
    Run.StopRequest.PAUSE: (Run.State.PAUSED, "paused by the user; resume continues from the checkpoint"),
    Run.StopRequest.PRUNE: (Run.State.PRUNED, "pruned by its search"),
}


@dataclass(frozen=True)
class Ending:
    """What an executor saw of an attempt's end."""

    exit_code: int | None  # the trainer's (negative: killed by that signal); None: it left no report
    stop_request: str = ""  # Run.StopRequest: what the workbench had asked for
    message: str = ""  # the trainer's final status message
    end_state: str = ""  # the executor's own end state (Slurm's job state); "" for a local process
    where: str = ""  # appended to the executor's words: "job 12"
    superseded: bool = False  # the attempt found its run no longer its own while it watched


@dataclass(frozen=True)
class Outcome:
    state: str  # a Run.State: done, failed, aborted, paused, pruned or interrupted
    reason: str


def decide(ending: Ending) -> Outcome:
    code, request = ending.exit_code, ending.stop_request
    suffix = f" ({ending.where})" if ending.where else ""
    if ending.superseded:
        return Outcome(SUPERSEDED, "the run was no longer this attempt's")
    if code == protocol.EXIT_DONE:
        return Outcome(Run.State.DONE, ending.message or "finished")
    if request == Run.StopRequest.ABORT:
        return Outcome(*STOPPED_BY[request])
    stopped = code is None or code == protocol.EXIT_STOPPED or code < 0
    if request in STOPPED_BY and stopped:
        return Outcome(*STOPPED_BY[request])
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


def stop_words(run: Run) -> tuple[str, str]:
    """The state and words of the run's pending stop request (a prune in its pruner's words)."""
    state, words = STOPPED_BY[run.stop_request]
    if run.stop_request == Run.StopRequest.PRUNE and run.stop_reason:
        words = run.stop_reason
    return state, words


# An attempt that was placed or submitted: running, or waiting in Slurm's queue for a requeue.
_STARTED = (Run.State.RUNNING, Run.State.WAITING)


def interrupt(run: Run, why: str, *, on_attempt: int | None = None) -> bool:
    """The run stopped without anyone asking (its worker or node died, the trainer was killed):
    a pending stop request now takes effect; otherwise it waits to resume from its checkpoint,
    until RUN_MAX_ATTEMPTS attempts have been interrupted, when it fails. Given `on_attempt`, only
    while the run is still on that attempt."""
    if run.stop_request in STOPPED_BY:
        state, words = stop_words(run)
        reason = f"{words} ({why})"
    elif run.attempt >= settings.RUN_MAX_ATTEMPTS:
        state, reason = Run.State.FAILED, f"interrupted {run.attempt} times; the last time {why}"
    else:
        state, reason = Run.State.INTERRUPTED, f"interrupted: {why}; it resumes from its checkpoint"
    return run_finish(run=run, to_state=state, reason=reason, from_states=_STARTED, on_attempt=on_attempt)


def end_attempt(run: Run, outcome: Outcome, *, attempt: int) -> str:
    """Carries the outcome of `attempt` out: the run ends (or pauses), or is interrupted by the
    lifecycle's rule (resume, or fail after RUN_MAX_ATTEMPTS). Returns the state decided, or
    SUPERSEDED when the run is no longer this attempt's (then nothing changed)."""
    run.refresh_from_db()
    if outcome.state == SUPERSEDED:
        return SUPERSEDED
    if outcome.state == Run.State.INTERRUPTED:
        changed = interrupt(run, outcome.reason, on_attempt=attempt)
    else:
        # A prune's words (rung, value, the trials it lost to) are the search's, kept on the run.
        reason = (run.stop_reason or outcome.reason) if outcome.state == Run.State.PRUNED else outcome.reason
        changed = run_finish(
            run=run, to_state=outcome.state, reason=reason, from_states=Run.ACTIVE_STATES, on_attempt=attempt
        )
    return outcome.state if changed or run.attempt == attempt else SUPERSEDED
