"""The one outcome table (attempts/outcome.py) held as a table, and the same endings carried out
by the local executor (a real child process it follows), the Slurm executor (its end of a job)
and a benchmark: a rule changed in the table reaches all of them."""

from __future__ import annotations

import json
import signal
import sys
import time

import pytest

from tests.support.waiting import wait_until
from tests.workbench.runs.conftest import TINY_CONFIG
from trainer import protocol
from workbench.benchmarks import runner
from workbench.runs.attempts import gates
from workbench.runs.attempts.files import AttemptFiles
from workbench.runs.attempts.ingest import IngestLedger
from workbench.runs.attempts.outcome import LOST, SUPERSEDED, Ending, Outcome, decide, end_attempt, interrupt
from workbench.runs.executors import local
from workbench.runs.executors.slurm import reconcile
from workbench.runs.models import Run
from workbench.runs.services import run_create
from workbench.slurm.commands import Job
from workbench.workers.processes import start_child

DONE, STOPPED, FAILED, OOM = protocol.EXIT_DONE, protocol.EXIT_STOPPED, protocol.EXIT_FAILED, protocol.EXIT_OOM
ABORT, PAUSE, PRUNE = Run.StopRequest.ABORT, Run.StopRequest.PAUSE, Run.StopRequest.PRUNE
S = Run.State

# (exit code, stop request, executor end state) -> (state, words the reason starts with)
TABLE = [
    (DONE, "", "", S.DONE, "finished"),
    (DONE, ABORT, "", S.DONE, "finished"),  # the work was complete before the abort arrived
    (DONE, PAUSE, "CANCELLED", S.DONE, "finished"),
    (STOPPED, ABORT, "", S.ABORTED, "aborted by the user"),
    (-signal.SIGKILL, ABORT, "", S.ABORTED, "aborted by the user"),  # killed after the grace
    (FAILED, ABORT, "", S.ABORTED, "aborted by the user"),  # failed on its way out
    (None, ABORT, "CANCELLED", S.ABORTED, "aborted by the user"),
    (STOPPED, PAUSE, "", S.PAUSED, "paused by the user"),
    (-signal.SIGKILL, PAUSE, "", S.PAUSED, "paused by the user"),
    (None, PAUSE, "CANCELLED", S.PAUSED, "paused by the user"),
    (OOM, PAUSE, "", S.FAILED, "out of memory"),  # resuming would fail the same way
    (STOPPED, PRUNE, "", S.PRUNED, "pruned by its search"),  # a search's prune that stopped
    (DONE, PRUNE, "", S.DONE, "finished"),  # the last epoch was done before the prune arrived
    (OOM, PRUNE, "", S.FAILED, "out of memory"),
    (OOM, "", "", S.FAILED, "out of memory"),
    (FAILED, "", "NODE_FAIL", S.FAILED, "failed"),  # its own failure, whatever the node did
    (None, "", "NODE_FAIL", S.INTERRUPTED, "a node of the job failed"),
    (STOPPED, "", "PREEMPTED", S.INTERRUPTED, "the job was preempted"),
    (None, "", "BOOT_FAIL", S.INTERRUPTED, "a node of the job failed to boot"),
    (None, "", LOST, S.INTERRUPTED, "its job ended while nobody followed it"),
    (None, "", "CANCELLED", S.ABORTED, "cancelled in Slurm"),
    (STOPPED, "", "TIMEOUT", S.FAILED, "the job reached its time limit"),
    (None, "", "COMPLETED", S.FAILED, "the job ended (job 7) without a final report"),
    (None, "", "OUT_OF_MEMORY", S.FAILED, "the job ran out of host memory"),
    (STOPPED, "", "", S.INTERRUPTED, "the trainer was stopped (exit code 3)"),  # the worker stopping
    (-signal.SIGTERM, "", "", S.INTERRUPTED, "the trainer was stopped (signal 15)"),
    (77, "", "", S.INTERRUPTED, "the trainer was stopped (exit code 77)"),
]


@pytest.mark.parametrize("code, request_, end_state, state, words", TABLE)
def test_it_decides_every_ending_by_one_table(code, request_, end_state, state, words):
    decided = decide(Ending(code, stop_request=request_, end_state=end_state, where="job 7" if end_state else ""))
    assert (decided.state, decided.reason[: len(words)]) == (state, words)


def test_it_keeps_the_trainers_own_words():
    assert decide(Ending(DONE, message="finished 2 epochs")).reason == "finished 2 epochs"
    assert decide(Ending(OOM, message="batch 512 does not fit in 8 GiB")).reason == "batch 512 does not fit in 8 GiB"


# What each executor sees when its trainer ends: the same cases, through each one's own end.
CASES = [
    ("done", DONE, "", "COMPLETED", S.DONE),
    ("abort", STOPPED, ABORT, "FAILED", S.ABORTED),
    ("pause", STOPPED, PAUSE, "FAILED", S.PAUSED),
    ("done while aborting", DONE, ABORT, "COMPLETED", S.DONE),
]

# A trainer stand-in: it writes its final status and exits with its code. It ignores SIGTERM, so
# a stop request the watch passes on cannot race the status it is about to write.
FAKE_TRAINER = """
import json, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
code = int(sys.argv[2])
with open(sys.argv[1], "a") as events:
    events.write(json.dumps({"type": "status", "time": time.time(), "state": "x", "exit_code": code,
                             "message": "finished" if code == 0 else "stopped at step 3"}) + "\\n")
time.sleep(0.5)  # alive when the watch first looks for a stop request; gone before a system sample
sys.exit(code)
"""


def _started_run(owner, dataset, executor: str, stop_request: str) -> Run:
    run = run_create(
        owner=owner, dataset=dataset, name=executor, network="lenet", config=TINY_CONFIG,
        device_request={"kind": "cpu"}, executor=executor,
    )  # fmt: skip
    Run.objects.filter(pk=run.pk).update(
        state=S.RUNNING, attempt=1, launched_attempt=1, stop_request=stop_request, slurm_job_id="7"
    )
    run.refresh_from_db()
    run.run_dir.mkdir(parents=True, exist_ok=True)
    return run


@pytest.mark.parametrize("case, code, request_, slurm_state, state", CASES, ids=[case[0] for case in CASES])
def test_it_ends_the_same_cases_alike_on_every_executor(
    db, owner, make_dataset, case, code, request_, slurm_state, state
):
    dataset = make_dataset(owner)
    # Local: the executor follows a real child process, as it follows a trainer.
    run = _started_run(owner, dataset, Run.Executor.LOCAL, request_)
    files = AttemptFiles(run.run_dir, 1)
    ledger = IngestLedger(run, 1)
    ledger.start()
    with (run.run_dir / "fake.log").open("ab") as output:
        process = start_child(
            [sys.executable, "-c", FAKE_TRAINER, str(files.events), str(code)], stdout=output, own_session=True
        )
    # Its SIGTERM handler is set once it has written: from then on the watch may pass a stop on.
    written = lambda: files.events.exists() and files.events.stat().st_size > 0  # noqa: E731
    wait_until(written, what="the stand-in's status", timeout=30)
    assert local.follow(run, process, files, ledger) == state
    # Slurm: the follower sees the job end, with the same events file on the shared storage.
    slurm_run = _started_run(owner, dataset, Run.Executor.SLURM, request_)
    status = {"type": "status", "time": time.time(), "state": "x", "exit_code": code, "message": "finished"}
    AttemptFiles(slurm_run.run_dir, 1).events.write_text(json.dumps(status) + "\n")
    reconcile.ended(slurm_run, Job("7", f"wb-run{slurm_run.pk}-a1", slurm_state, "", None, "n1", 0))
    run.refresh_from_db()
    slurm_run.refresh_from_db()
    assert (run.state, slurm_run.state) == (state, state)
    assert run.transitions.last().reason.split(";")[0] == slurm_run.transitions.last().reason.split(";")[0]


def test_it_ends_a_benchmark_by_the_same_table():
    from workbench.benchmarks.models import Benchmark  # noqa: PLC0415  (the table's third user)

    assert runner._BENCHMARK_STATES[decide(Ending(DONE, stop_request=ABORT)).state] == Benchmark.State.DONE
    assert runner._BENCHMARK_STATES[decide(Ending(STOPPED, stop_request=ABORT)).state] == Benchmark.State.CANCELLED
    assert runner._BENCHMARK_STATES[decide(Ending(OOM)).state] == Benchmark.State.FAILED
    assert runner._BENCHMARK_STATES[decide(Ending(-signal.SIGKILL)).state] == Benchmark.State.FAILED


# Row 0: an attempt that no longer owns its run decides nothing, whatever it saw.
@pytest.mark.parametrize("code, request_, end_state", [(DONE, "", ""), (-signal.SIGKILL, ABORT, ""), (None, "", LOST)])
def test_it_decides_nothing_for_an_attempt_that_lost_its_run(code, request_, end_state):
    assert decide(Ending(code, stop_request=request_, end_state=end_state, superseded=True)).state == SUPERSEDED


@pytest.mark.parametrize(
    "request_, state, words",
    [(ABORT, S.ABORTED, "aborted by the user"), (PAUSE, S.PAUSED, "paused by the user"), (PRUNE, S.PRUNED, "pruned")],
)
def test_it_ends_a_stop_before_the_trainer_started_by_the_same_table(db, owner, make_dataset, request_, state, words):
    # A trial pruned while it waited for its devices ends pruned, not paused (the gate had its own copy).
    run = _started_run(owner, make_dataset(owner), Run.Executor.LOCAL, request_)
    assert gates.stop_gate(run, from_states=[S.RUNNING])
    run.refresh_from_db()
    assert (run.state, run.transitions.last().reason[: len(words)]) == (state, words)


def test_it_changes_nothing_when_a_stale_attempt_ends_after_a_new_one_started(db, owner, make_dataset):
    # The worker was declared lost while it lived: the run was interrupted and relaunched as
    # attempt 2. Attempt 1's watch then finds the run is no longer its own: it kills its own
    # trainer (nobody's abort), and its end neither ends the run nor stops attempt 2.
    run = _started_run(owner, make_dataset(owner), Run.Executor.LOCAL, "")
    files = AttemptFiles(run.run_dir, 1)
    ledger = IngestLedger(run, 1)
    ledger.start()
    with (run.run_dir / "stale.log").open("ab") as output:
        process = start_child([sys.executable, "-c", "import time; time.sleep(600)"], stdout=output, own_session=True)
    Run.objects.filter(pk=run.pk).update(attempt=2, launched_attempt=2, trainer_pid=4242)

    assert local.follow(run, process, files, ledger) == SUPERSEDED
    assert process.returncode == -signal.SIGKILL
    run.refresh_from_db()
    assert (run.state, run.attempt, run.trainer_pid, run.stop_request) == (S.RUNNING, 2, 4242, "")
    assert not run.transitions.filter(to_state__in=[S.ABORTED, S.INTERRUPTED, S.FAILED]).exists()
    # Whatever a stale attempt would have decided, carried out on attempt 1, changes nothing.
    for stale in (Outcome(S.ABORTED, "aborted by the user"), Outcome(S.INTERRUPTED, "x"), Outcome(S.DONE, "x")):
        assert end_attempt(run, stale, attempt=1) == SUPERSEDED
    run.refresh_from_db()
    assert (run.state, run.attempt) == (S.RUNNING, 2)


def test_it_ends_an_attempt_its_run_was_interrupted_under_without_blaming_the_user(db, owner, make_dataset):
    # The same watch when the run was interrupted but not yet relaunched: before, the watch asked
    # its trainer to stop with an ABORT and the run ended "aborted by the user".
    run = _started_run(owner, make_dataset(owner), Run.Executor.LOCAL, "")
    files = AttemptFiles(run.run_dir, 1)
    ledger = IngestLedger(run, 1)
    ledger.start()
    with (run.run_dir / "stale.log").open("ab") as output:
        process = start_child([sys.executable, "-c", "import time; time.sleep(600)"], stdout=output, own_session=True)
    assert interrupt(run, "worker w stopped sending heartbeats", on_attempt=1)

    assert local.follow(run, process, files, ledger) == SUPERSEDED
    run.refresh_from_db()
    assert run.state == S.INTERRUPTED
    assert not run.transitions.filter(to_state=S.ABORTED).exists()
