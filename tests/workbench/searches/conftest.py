import shutil

import pytest

from tests.support.factories import make_dataset_row
from tests.support.trainer_data import make_dataset_folder


@pytest.fixture(autouse=True)
def _passes_are_the_tests(request, monkeypatch):
    """A search test that commits its rows (transactional_db) makes its passes itself, and counts
    on no other: but the suite's worker, once another file on this process of the suite started
    it, made a pass of its own on every queued advance and every heartbeat, and took the trials
    the test meant to start. Here the queued advances go nowhere and the test holds the
    housekeeping lock. Tests that use the worker (celery_worker) keep both."""
    if "transactional_db" not in request.fixturenames or "celery_worker" in request.fixturenames:
        return
    from workbench.searches import services

    monkeypatch.setattr(services, "queue_advance", lambda search_id: None)
    request.getfixturevalue("housekeeping_held")


@pytest.fixture
def dataset(owner):
    """`owner`'s ready dataset "bars": 8x8 grey images of three classes (24 to train on, 12 to
    validate), with its LMDBs on disk."""
    dataset = make_dataset_row(
        owner, image_width=8, image_height=8, channels=1,
        labels=["class_0", "class_1", "class_2"], splits={"train": {"count": 24}, "val": {"count": 12}},
    )  # fmt: skip
    # Rows are rolled back after each test and their ids used again: start from an empty folder.
    shutil.rmtree(dataset.path, ignore_errors=True)
    make_dataset_folder(dataset.path)
    return dataset
