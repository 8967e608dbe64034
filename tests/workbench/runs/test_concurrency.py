"""Many processes submitting and scheduling at the same moment never double-book a GPU.

SQLite (the default) and PostgreSQL (production), each with real concurrent processes.
"""

import multiprocessing
import os
import random
import time

import pytest

from tests.support import loadgen
from tests.support.factories import make_dataset_row
from tests.support.fresh_interpreter import run_main_in_fresh_interpreter
from tests.workbench.test_production_config import POSTGRES_ADMIN_URL, postgres_url  # noqa: F401
from workbench.runs.models import Run

pytestmark = [pytest.mark.slow]

PROCESSES = 6
RUNS_PER_PROCESS = 8


def requests(seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"kind": "count", "count": rng.choice([1, 1, 2, 4])} for _ in range(RUNS_PER_PROCESS)]


def hammer(env: dict[str, str], owner_ids: list[int], dataset_id: int) -> None:
    context = multiprocessing.get_context("spawn")
    start_at = time.time() + 4.0  # all processes start submitting at the same moment
    with context.Pool(PROCESSES + 1) as pool:
        submitted = [
            pool.apply_async(loadgen.submitter, (env, owner_ids, dataset_id, requests(seed), start_at))
            for seed in range(PROCESSES)
        ]
        # The finisher plays the trainers until every run has ended: a deadline would leave runs
        # submitted late on a busy machine waiting on hosts nobody keeps alive any more.
        total = PROCESSES * RUNS_PER_PROCESS
        finisher = pool.apply_async(loadgen.finisher, (env, total, 0.3, start_at + 200, 0))
        assert sum(result.get(timeout=240) for result in submitted) == PROCESSES * RUNS_PER_PROCESS
        finisher.get(timeout=240)


def test_it_never_double_books_on_sqlite(tmp_path):
    # The embedded default: SQLite in a data dir of its own, in a fresh interpreter. Not the test
    # database: the session's Celery worker heartbeats into that one, lends its own devices to
    # these runs and starts real trainers on them, which failed and left a run never done.
    run_in_fresh_interpreter(tmp_path, database_url=None)


def test_it_never_double_books_on_postgresql(tmp_path, postgres_url):  # noqa: F811
    run_in_fresh_interpreter(tmp_path, database_url=postgres_url)


def run_in_fresh_interpreter(data_dir, *, database_url: str | None) -> None:
    # No broker either (the launches are refused at once; nobody would take them).
    out = run_main_in_fresh_interpreter(__name__, data_dir, database_url=database_url, timeout=400)
    assert "problems: []" in out, out
    assert "unfinished: []" in out, out  # each with how it got there


def main() -> None:
    """Runs in a fresh interpreter on the database its environment names (see the tests above)."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from workbench.workers.simulation import simulate_hosts

    call_command("migrate", verbosity=0)
    users = [get_user_model().objects.create_user(f"user{i}") for i in range(3)]
    simulate_hosts(hosts=2, gpus_per_host=4)
    dataset = make_dataset_row(users[0], name="d")
    keys = ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "WORKBENCH_DATA_DIR")
    env = {key: os.environ[key] for key in keys if key in os.environ}
    hammer(env, [u.pk for u in users], dataset.pk)
    print("runs:", Run.objects.count(), "done:", Run.objects.filter(state=Run.State.DONE).count())
    print("problems:", loadgen.check_allocations())
    unfinished = [
        f"{run.name}: {run.state}, {run.device_request_text()}, {[t.reason for t in run.transitions.all()]}"
        for run in Run.objects.exclude(state=Run.State.DONE)
    ]
    print("unfinished:", unfinished)
