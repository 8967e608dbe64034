import pytest

from datasets.models import Dataset
from trainer.testing import make_dataset_folder


@pytest.fixture
def make_dataset():
    """A built (ready) dataset of tiny synthetic images, owned by `owner`."""

    def make(owner, *, name: str = "bars", status: str = Dataset.Status.READY, **folder_options) -> Dataset:
        dataset = Dataset.objects.create(owner=owner, name=name, status=status, image_width=8, image_height=8)
        if status == Dataset.Status.READY:
            make_dataset_folder(dataset.path, **folder_options)
        return dataset

    return make


# Small enough to train in a few seconds on one core.
TINY_CONFIG = {
    "epochs": 2,
    "batch_size": 8,
    "metrics_interval": 1,
    "data": {"num_workers": 0},
    "solver": {"optimizer": "sgd", "base_lr": 0.05},
}
