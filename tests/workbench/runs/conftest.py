import shutil

import pytest

from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from tests.support.trainer_data import make_dataset_folder


@pytest.fixture
def make_dataset():
    """A built (ready) dataset of tiny synthetic images, owned by `owner`."""

    def make(owner, *, name: str = "bars", status: str = Dataset.Status.READY, **folder_options) -> Dataset:
        dataset = make_dataset_row(owner, name=name, status=status, image_width=8, image_height=8)
        if status == Dataset.Status.READY:
            # Rows are rolled back after each test and their ids used again: start from an empty
            # folder, whatever an earlier test left under this id (another dataset's LMDBs).
            shutil.rmtree(dataset.path, ignore_errors=True)
            make_dataset_folder(dataset.path, **folder_options)
        return dataset

    return make


BARS_LABELS = ["class_0", "class_1", "class_2"]


@pytest.fixture
def dataset(owner):
    """`owner`'s ready dataset "bars": 8x8 grey images of three classes, 24 to train on and 12 to
    validate, with the LMDBs on disk (modules that need only the row define their own)."""
    dataset = make_dataset_row(
        owner,
        image_width=8,
        image_height=8,
        channels=1,
        labels=BARS_LABELS,
        splits={"train": {"count": 24}, "val": {"count": 12}},
    )
    make_dataset_folder(dataset.path)
    return dataset


# Small enough to train in a few seconds on one core.
TINY_CONFIG = {
    "epochs": 2,
    "batch_size": 8,
    "metrics_interval": 1,
    "data": {"num_workers": 0},
    "solver": {"optimizer": "sgd", "base_lr": 0.05},
}


@pytest.fixture
def run(owner):
    """A run to stream events into (no training): queued on a dataset still building, so never started."""
    from workbench.runs import series
    from workbench.runs.services import run_create

    dataset = make_dataset_row(owner, status=Dataset.Status.BUILDING)
    run = run_create(owner=owner, dataset=dataset, name="r", network="lenet", config={}, device_request={"kind": "cpu"})
    series.forget(run.pk)
    return run


# Runs made only to exercise the live stream must stay out of the way of the real worker that
# other tests start for the session: its scheduler would start them (and add events). A run on a
# dataset still building is never started, and a run marked running on a parked host (a host row
# whose heartbeat never expires) is never reclaimed.
def parked_host():
    from datetime import timedelta

    from django.utils import timezone

    from workbench.workers.models import WorkerHost

    host, _ = WorkerHost.objects.update_or_create(
        hostname="parked@tests", defaults={"last_seen": timezone.now() + timedelta(days=1)}
    )
    return host
