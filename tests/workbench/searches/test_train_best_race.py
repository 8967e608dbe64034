""" "Train the best" asked by several processes at the same moment queues one run, on SQLite (the
embedded default, a WAL file) and on PostgreSQL (production): services.search_train_best's lock
is the database's, which the suite's in-process test (test_api) cannot prove on its database.
"""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from tests.support.fresh_interpreter import run_main_in_fresh_interpreter
from tests.workbench.test_production_config import postgres_url  # noqa: F401

pytestmark = [pytest.mark.slow]

PROCESSES = 6


def test_it_queues_one_best_run_for_racing_processes_on_sqlite(tmp_path):
    run_in_fresh_interpreter(tmp_path, database_url=None)


def test_it_queues_one_best_run_for_racing_processes_on_postgresql(tmp_path, postgres_url):  # noqa: F811
    run_in_fresh_interpreter(tmp_path, database_url=postgres_url)


def run_in_fresh_interpreter(data_dir, *, database_url: str | None) -> None:
    out = run_main_in_fresh_interpreter(__name__, data_dir, database_url=database_url, timeout=300)
    assert "best runs: 1, answers: one run, one of them new" in out, out


def main() -> None:
    """In a fresh interpreter on the database its environment names: a search with a complete
    trial, then PROCESSES processes ask for its best run at the same moment."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from tests.support.factories import make_dataset_row
    from tests.workbench.runs.conftest import TINY_CONFIG
    from workbench.searches.models import BestRun, Trial
    from workbench.searches.services import search_advance, search_create

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("owner")
    dataset = make_dataset_row(owner, name="d")
    dataset.status = "building"  # the queued runs never start: no worker here
    dataset.save()
    space = {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1}}
    search = search_create(
        owner=owner, dataset=dataset, name="s", network="lenet", config=TINY_CONFIG, space=space, gpus="cpu",
        trials=1, parallel=1, sampler="random", seed=3,
    )  # fmt: skip
    search_advance(search_id=search.pk)
    Trial.objects.filter(search=search).update(state=Trial.State.COMPLETE, value=0.25)
    keys = ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "WORKBENCH_DATA_DIR")
    env = {key: os.environ[key] for key in keys if key in os.environ}
    context = multiprocessing.get_context("spawn")
    # Every process asks at the same moment: once all of them are spawned and set up, however long
    # a busy machine takes for that (a fixed moment 10 s ahead came too soon at a load of 4 on 2 cores).
    with context.Manager() as manager, context.Pool(PROCESSES) as pool:
        ready = manager.Barrier(PROCESSES, timeout=240)
        answers = pool.starmap(ask_for_best, [(env, search.pk, ready)] * PROCESSES, chunksize=1)
    runs, new = {run for run, _ in answers}, sum(created for _, created in answers)
    count = BestRun.objects.filter(search=search).count()
    said = "one run, one of them new" if (len(runs), new) == (1, 1) else f"{len(runs)} runs, {new} new"
    print(f"best runs: {count}, answers: {said}")


def ask_for_best(env: dict[str, str], search_id: int, ready) -> tuple[int, bool]:
    os.environ.update(env)
    import django

    django.setup()
    from workbench.searches import services
    from workbench.searches.models import Search

    submit = services._submit_with

    def slow_submit(*args, **kwargs):
        # Queuing a run takes this long: every request is inside its check-then-queue at once,
        # so only the lock keeps the others from queuing their own (without it: six runs).
        time.sleep(1.0)
        return submit(*args, **kwargs)

    services._submit_with = slow_submit
    search = Search.objects.get(pk=search_id)
    ready.wait()
    run, created = services.search_train_best(search=search)
    return run.pk, created
