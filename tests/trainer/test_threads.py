"""Intra-op threads per training process (trainer/threads.py, issue 33): each process gets its
share of the cores it may use, not torch's thread per core, so a node's ranks and their loader
workers do not run more busy threads than it has cores."""

from __future__ import annotations

import pytest
import torch

from trainer import engine, threads
from trainer.events import ListReporter
from trainer.protocol import EXIT_DONE
from trainer.run import train

from .conftest import make_config


@pytest.fixture(autouse=True)
def _torch_threads_kept(monkeypatch):
    """The tests set the pytest process's own threads: put them back."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(
    ("cores", "processes", "workers", "share"),
    [
        (2, 1, 2, 1),  # the busy 2-core machine of the issue: one rank and its two loader workers
        (2, 1, 0, 2),
        (16, 1, 2, 5),
        (16, 2, 0, 8),  # torchrun's case: several ranks on one host
        (16, 4, 3, 1),
        (1, 8, 4, 1),  # never below one
    ],
)
def test_it_gives_each_process_its_share_of_the_cores(cores, processes, workers, share):
    assert threads.thread_share(cores, processes, workers) == share


def test_it_counts_the_cores_the_process_may_use_not_the_machines(monkeypatch):
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 3, 5})
    assert threads.usable_cores() == 3


def test_it_trains_with_its_share_and_leaves_an_operators_thread_count(tmp_path, gray8, monkeypatch):
    # Today's trainer left torch's default (a thread per core) to each rank.
    seen: list[int] = []
    fit = engine.fit
    monkeypatch.setattr(engine, "fit", lambda run: seen.append(torch.get_num_threads()) or fit(run))
    monkeypatch.setattr(threads, "usable_cores", lambda: 6)
    torch.set_num_threads(4)
    cfg = make_config(tmp_path / "run", gray8, epochs=1, data={"num_workers": 2})
    assert train(cfg, reporter=ListReporter()) == EXIT_DONE
    assert seen == [2]  # 6 cores for one process and its 2 loader workers
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    torch.set_num_threads(3)
    assert train(make_config(tmp_path / "again", gray8, epochs=1), reporter=ListReporter()) == EXIT_DONE
    assert seen == [2, 3]
