import shutil

import numpy as np
import pytest

from tests.support.factories import make_dataset_row
from tests.support.trainer_data import make_dataset_folder

FLIPPED = (3, 10, 17)  # training images whose labels the `noisy` fixture flips


@pytest.fixture
def noisy(owner):
    """A built dataset of 3 learnable classes (8x8 bars), 48 train and 12 val images, with the
    labels of the training images FLIPPED moved to the next class."""
    dataset = make_dataset_row(owner, name="bars", image_width=8, image_height=8, channels=1,
                               labels=["class_0", "class_1", "class_2"])  # fmt: skip
    shutil.rmtree(dataset.path, ignore_errors=True)
    make_dataset_folder(dataset.path, num_classes=3, size=8, channels=1, train=48, val=12)
    from trainer.datum import DatumLMDB, decode_datum, encode_datum, write_datum_lmdb

    db = DatumLMDB(dataset.path / "train_db")
    records = []
    try:
        for index, key in enumerate(db.keys()):
            image, label = decode_datum(db.raw(index), key=key)
            label = (label + 1) % 3 if index in FLIPPED else label
            records.append((key, encode_datum(np.ascontiguousarray(image.transpose(1, 2, 0)), label)))
    finally:
        db.close()
    shutil.rmtree(dataset.path / "train_db")
    write_datum_lmdb(dataset.path / "train_db", records, map_size=1 << 24)
    dataset.splits = {"train": {"count": 48}, "val": {"count": 12}}
    dataset.save()
    return dataset
