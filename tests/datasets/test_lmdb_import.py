"""Importing Caffe Datum LMDBs and DIGITS job folders: validated record by record in a child
process; bad records reported and never kept."""

from __future__ import annotations

import os

import numpy as np
import pytest

from datasets import building, services
from datasets.models import Dataset
from tests.support.trainer_data import write_dataset_folder
from trainer.dataset_folder import load_dataset_folder
from trainer.datum import DatumLMDB, encode_datum, write_datum_lmdb


def _images(n, h=6, w=5, c=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 255, (n, h, w, c), dtype=np.uint8)


def _import(owner, path, kind, **source) -> Dataset:
    dataset = services.dataset_create(
        owner=owner, name="imp", kind=kind, source={"path": str(path), **source}, options={}, queue=False
    )
    building.dataset_build(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    return dataset


@pytest.mark.django_db
@pytest.mark.parametrize("encoding", ["none", "png", "jpg"])
def test_it_imports_a_caffe_lmdb_raw_or_encoded(owner, import_root, encoding):
    images = _images(8)
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    records = ((b"caffe-key-%d" % i, encode_datum(images[i], int(labels[i]), encoding=encoding)) for i in range(8))
    write_datum_lmdb(import_root / "train_lmdb", records, map_size=1 << 22)
    (import_root / "labels.txt").write_text("x\ny\nz\n")
    dataset = _import(owner, import_root / "train_lmdb", "lmdb", labels=str(import_root / "labels.txt"))
    assert dataset.status == "ready", dataset.error
    assert dataset.labels == ["x", "y", "z"]
    assert dataset.splits == {"train": {"count": 8, "class_counts": [3, 3, 2]}}
    assert (dataset.image_width, dataset.image_height, dataset.channels) == (5, 6, 3)
    assert dataset.encoding == encoding
    db = DatumLMDB(dataset.path / "train_db")
    assert db.keys()[0] == b"00000000_0"
    pixels, label = db[0]
    if encoding != "jpg":
        assert np.array_equal(pixels, images[0].transpose(2, 0, 1))
    stored = np.stack([db[i][0] for i in range(len(db))]).astype(np.float64)
    db.close()
    mean = load_dataset_folder(dataset.path).mean_image()
    assert np.allclose(mean, stored.mean(0), atol=1e-3)  # the mean of what was kept


@pytest.mark.django_db
def test_it_imports_a_whole_digits_job_folder(owner, import_root):
    images = _images(12, c=1)
    splits = {"train": (images[:8], np.arange(8) % 2), "val": (images[8:], np.arange(4) % 2)}
    folder = write_dataset_folder(import_root / "digits-job", splits, ["cat", "dog"], digits_layout=True)
    dataset = _import(owner, folder, "digits")
    assert dataset.status == "ready", dataset.error
    assert dataset.labels == ["cat", "dog"]
    assert dataset.splits["val"] == {"count": 4, "class_counts": [2, 2]}
    assert dataset.channels == 1


@pytest.mark.django_db
def test_it_reports_bad_records_and_keeps_only_good_ones(owner, import_root):
    images = _images(4)
    odd = _images(1, h=9, w=9)[0]
    records = [
        (b"a", encode_datum(images[0], 0)),
        (b"b", b"\xff\xfe garbage that is not a protobuf"),
        (b"c", encode_datum(images[1], 5)),  # label out of range for 2 labels
        (b"d", encode_datum(odd, 1)),  # another shape
        (b"e", encode_datum(images[2], 1)),
        (b"f", encode_datum(images[3], 1)),
    ]
    write_datum_lmdb(import_root / "db", records, map_size=1 << 22)
    (import_root / "labels.txt").write_text("a\nb\n")
    dataset = _import(owner, import_root / "db", "lmdb", labels=str(import_root / "labels.txt"))
    assert dataset.status == "ready", dataset.error
    assert dataset.splits["train"] == {"count": 3, "class_counts": [1, 2]}
    reasons = {s["path"]: s["reason"] for s in services.dataset_skipped(dataset=dataset)}
    assert reasons.keys() == {"train record b", "train record c", "train record d"}
    assert "not a Caffe Datum" in reasons["train record b"]
    assert reasons["train record c"] == "label 5 is out of range (0..1)"
    assert reasons["train record d"].startswith("shape 3x9x9 differs")


@pytest.mark.django_db
def test_it_refuses_an_lmdb_of_random_bytes(owner, import_root):
    folder = import_root / "random_db"
    folder.mkdir()
    (folder / "data.mdb").write_bytes(os.urandom(64 * 1024))
    dataset = _import(owner, folder, "lmdb")
    assert dataset.status == "failed"
    assert "not an LMDB database (" in dataset.error and "File is not an LMDB file" in dataset.error
    assert not dataset.path.exists()


@pytest.mark.django_db
def test_it_refuses_an_lmdb_holding_no_datums(owner, import_root):
    write_datum_lmdb(import_root / "text_db", ((b"k%d" % i, b"hello world %d" % i) for i in range(5)), map_size=1 << 20)
    dataset = _import(owner, import_root / "text_db", "lmdb")
    assert dataset.status == "failed"
    assert "none of its 5 records is a usable Caffe Datum" in dataset.error
    assert not dataset.path.exists()
