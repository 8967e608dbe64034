import shutil

import pytest

from tests.support.factories import make_dataset_row
from tests.support.trainer_data import make_dataset_folder


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
