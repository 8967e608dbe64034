"""Building: the dataset folder the trainer reads, in-process and with worker processes,
the mean, skipped files, cancel and failure leaving nothing half-written."""

from __future__ import annotations

import json

import lmdb
import numpy as np
import pytest
from django.conf import settings
from PIL import Image

from datasets import building, services
from datasets.build import ImageOptions, build_lmdbs
from datasets.images import ImageLimits
from datasets.models import Dataset
from datasets.sources import SplitOptions, plan_folder
from tests.datasets.conftest import image_bytes, make_class_folders, noise_image
from trainer.dataset_folder import load_dataset_folder
from trainer.datum import DatumLMDB, read_mean_blobproto


def _build(owner, path, *, kind="folder", **options) -> Dataset:
    dataset = services.dataset_create(
        owner=owner, name="t", kind=kind, source={"path": str(path)}, options=options, queue=False
    )
    building.dataset_build(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    return dataset


def _leftovers() -> list[str]:
    root = settings.DATA_DIR / "datasets"
    return [p.name for p in root.iterdir() if p.name.startswith(".")] if root.exists() else []


@pytest.mark.django_db
def test_it_builds_the_dataset_folder_the_trainer_reads(owner, import_root):
    root = make_class_folders(import_root / "src", {"red": 4, "green": 4}, size=(20, 10))
    dataset = _build(owner, root, image_width=8, image_height=6, val_percent=25, encoding="none")
    assert dataset.status == "ready", dataset.error
    meta = json.loads((dataset.path / "dataset.json").read_text())
    assert meta == {
        "format_version": 1,
        "name": "t",
        "image_width": 8,
        "image_height": 6,
        "channels": 3,
        "resize_mode": "squash",
        "encoding": "none",
        "labels": ["green", "red"],
        "splits": {
            "train": {"db": "train_db", "count": 6, "class_counts": [3, 3]},
            "val": {"db": "val_db", "count": 2, "class_counts": [1, 1]},
        },
        "mean": {"npy": "mean.npy", "png": "mean.png", "binaryproto": "mean.binaryproto"},
    }
    assert (dataset.path / "labels.txt").read_text() == "green\nred\n"
    info = load_dataset_folder(dataset.path)
    assert info.splits["train"].count == 6
    # Classes are solid colours, three of each in train: the mean is their average.
    colours = {0: (40, 215, 100), 1: (0, 255, 100)}  # make_class_folders: class index -> colour
    expected = (np.array(colours[0]) + np.array(colours[1])) / 2
    mean = info.mean_image()
    assert mean.shape == (3, 6, 8) and mean.dtype == np.float32
    assert np.allclose(mean[:, 0, 0], expected, atol=1)
    assert np.allclose(read_mean_blobproto(dataset.path / "mean.binaryproto"), mean)
    assert Image.open(dataset.path / "mean.png").size == (8, 6)
    db = DatumLMDB(dataset.path / "train_db")
    keys = db.keys()
    assert keys[0].startswith(b"00000000_") and len(keys) == 6
    pixels, label = db[0]
    assert pixels.shape == (3, 6, 8) and keys[0] == b"00000000_%d" % label
    db.close()
    assert dataset.splits["train"]["class_counts"] == [3, 3]
    assert dataset.size_bytes > 0 and not _leftovers()


@pytest.mark.django_db
def test_it_names_each_stored_image_by_its_source_path(owner, import_root):
    # A test's galleries named images "#3" (issue 33): each split now keeps its images' source
    # names in key order, relative to the source, so no folder of the machine leaves the build.
    root = make_class_folders(import_root / "src", {"red": 3, "green": 3})
    dataset = _build(owner, root, image_width=8, image_height=6, val_percent=34)
    assert dataset.status == "ready", dataset.error
    labels = dataset.labels
    for split in ("train", "val"):
        where = load_dataset_folder(dataset.path).splits[split].names
        names = json.loads(where.read_text())
        assert where.name == f"{split}_names.json" and len(names) == dataset.splits[split]["count"]
        db = DatumLMDB(dataset.path / f"{split}_db")
        # key i holds the image named i: its class is the name's folder
        assert [labels[db[i][1]] for i in range(len(db))] == [name.split("/")[0] for name in names]
        db.close()
        assert all(name.split("/")[1].startswith("img_") and str(import_root) not in name for name in names)


def test_it_gives_the_same_lmdb_with_worker_processes(tmp_path):
    root = make_class_folders(tmp_path / "src", {"a": 20, "b": 20}, fmt="JPEG")
    plan = plan_folder(root, SplitOptions(val_percent=10, seed=3))
    options = ImageOptions(width=16, height=16, channels=1, resize_mode="fill", encoding="png")
    results = []
    for workers in (0, 2):
        out = tmp_path / f"out{workers}"
        results.append(
            build_lmdbs(
                plan.splits,
                plan.labels,
                out,
                name="x",
                options=options,
                workers=workers,
                limits=ImageLimits(max_pixels=10**7),
            )
        )
    assert results[0].splits == results[1].splits
    for split in ("train", "val"):
        contents = []
        for workers in (0, 2):
            env = lmdb.open(str(tmp_path / f"out{workers}" / f"{split}_db"), readonly=True, lock=False)
            with env.begin() as txn:
                contents.append(list(txn.cursor()))
            env.close()
        assert contents[0] == contents[1]


@pytest.mark.django_db
def test_it_skips_bad_files_with_reasons_and_builds_the_rest(owner, import_root):
    root = make_class_folders(import_root / "src", {"a": 3, "b": 3})
    (root / "a" / "empty.jpg").write_bytes(b"")
    (root / "a" / "notes.jpg").write_text("not an image")
    noise_image((40, 40)).save(root / "b" / "whole.png")
    good = (root / "b" / "whole.png").read_bytes()
    (root / "b" / "whole.png").unlink()
    (root / "b" / "cut.png").write_bytes(good[: len(good) // 2])
    Image.new("CMYK", (6, 6), (0, 0, 0, 0)).save(root / "b" / "cmyk.jpg")
    Image.new("P", (6, 6), 3).save(root / "b" / "palette.gif")
    Image.new("RGBA", (6, 6), (1, 2, 3, 128)).save(root / "b" / "alpha.png")
    dataset = _build(owner, root, val_percent=0, image_width=6, image_height=6)
    assert dataset.status == "ready", dataset.error
    skipped = {s["path"]: s["reason"] for s in services.dataset_skipped(dataset=dataset)}
    assert skipped.keys() == {"a/empty.jpg", "a/notes.jpg", "b/cut.png"}
    assert skipped["a/empty.jpg"] == "empty file (0 bytes)"
    assert skipped["a/notes.jpg"].startswith("not an image")
    assert skipped["b/cut.png"].startswith(("truncated", "image cannot be decoded"))
    assert dataset.splits["train"]["class_counts"] == [3, 6]  # CMYK, palette and alpha converted
    assert dataset.skipped_count == 3


@pytest.mark.django_db
def test_it_fails_clearly_when_nothing_usable_remains(owner, import_root):
    root = import_root / "src"
    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        for i in range(2):
            (root / name / f"{i}.jpg").write_text("text, not pixels")
    dataset = _build(owner, root)
    assert dataset.status == "failed"
    assert "no usable training images" in dataset.error
    assert not dataset.path.exists() and not _leftovers()


@pytest.mark.django_db
def test_it_cancels_and_leaves_nothing_half_written(owner, import_root, monkeypatch):
    root = make_class_folders(import_root / "src", {"a": 30, "b": 30})
    dataset = services.dataset_create(
        owner=owner,
        name="c",
        kind="folder",
        source={"path": str(root)},
        options={"image_width": 8, "image_height": 8},
        queue=False,
    )
    real = building._Progress.__call__

    def cancel_on_first_progress(self, done, total, rate):
        real(self, done, total, rate)
        services.dataset_cancel(dataset=Dataset.objects.get(pk=dataset.pk))

    monkeypatch.setattr(building._Progress, "__call__", cancel_on_first_progress)
    assert building.dataset_build(dataset_id=dataset.pk) == "cancelled"
    assert not dataset.path.exists() and not _leftovers()


@pytest.mark.django_db
def test_it_claims_the_row_once(owner, import_root):
    root = make_class_folders(import_root / "src", {"a": 2, "b": 2})
    dataset = _build(owner, root, val_percent=0)
    assert dataset.status == "ready"
    assert building.dataset_build(dataset_id=dataset.pk) == "skipped"  # a duplicate delivery


@pytest.mark.django_db
def test_it_imports_sklearn_digits_exported_as_png_folders(owner, import_root):
    from tests.datasets.conftest import sklearn_digits_folders

    root = sklearn_digits_folders(import_root / "digits", per_class=20)
    dataset = _build(owner, root, image_width=8, image_height=8, channels=1, val_percent=25)
    assert dataset.status == "ready", dataset.error
    assert dataset.labels == [str(i) for i in range(10)]
    assert dataset.splits["train"]["class_counts"] == [15] * 10
    assert dataset.splits["val"]["class_counts"] == [5] * 10
    info = load_dataset_folder(dataset.path)
    assert info.channels == 1 and info.mean_image().shape == (1, 8, 8)


@pytest.mark.django_db
def test_it_refuses_a_hostile_archive_and_leaves_nothing(owner, import_root):
    import io
    import tarfile

    archive = import_root / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        for name in ("a/1.png", "b/1.png"):
            info = tarfile.TarInfo(name)
            data = image_bytes()
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("b/passwd.png")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(link)
    dataset = _build(owner, archive, kind="archive")
    assert dataset.status == "failed"
    assert dataset.error == "member 'b/passwd.png': symbolic link"
    assert not dataset.path.exists() and not _leftovers()


@pytest.mark.django_db
def test_it_skips_a_decompression_bomb_inside_a_build(owner, import_root, settings):
    settings.MAX_IMAGE_PIXELS = 50 * 50
    root = make_class_folders(import_root / "src", {"a": 2, "b": 2}, size=(10, 10))
    Image.new("L", (100, 100)).save(root / "a" / "bomb.png")
    dataset = _build(owner, root, val_percent=0, image_width=4, image_height=4)
    assert dataset.status == "ready", dataset.error
    [skipped] = services.dataset_skipped(dataset=dataset)
    assert skipped["path"] == "a/bomb.png" and skipped["reason"].startswith("decompression bomb refused")


def test_it_grows_the_lmdb_map_when_it_fills(tmp_path):
    from datasets.build import LmdbWriter

    writer = LmdbWriter(tmp_path / "db", map_size=64 * 1024)
    for i in range(100):
        writer.put(b"%08d_0" % i, bytes([i]) * 10_000)
    writer.close()
    assert writer.map_size > 64 * 1024
    env = lmdb.open(str(tmp_path / "db"), readonly=True, lock=False)
    assert env.stat()["entries"] == 100
    env.close()


def test_it_hands_images_over_shared_memory_and_inline_when_the_slot_is_full(tmp_path):
    from multiprocessing import shared_memory

    from datasets.build import process_chunk

    root = make_class_folders(tmp_path / "src", {"a": 3}, size=(8, 8))
    items = [(i, str(p), 0, True) for i, p in enumerate(sorted((root / "a").iterdir()))]
    options = ImageOptions(width=8, height=8, channels=3, encoding="none")
    slot = shared_memory.SharedMemory(create=True, size=500)  # room for two 8x8x3 datums, not three
    try:
        rows, total, n = process_chunk(items, options, slot.name)
        kinds = [type(value).__name__ for _, value, _ in rows]
        assert kinds == ["tuple", "tuple", "bytes"]
        offset, length = rows[1][1]
        inline, _, _ = process_chunk(items, options)
        assert bytes(slot.buf[offset : offset + length]) == inline[1][1]
        assert n == 3 and total.dtype == np.uint16
    finally:
        from datasets import build

        build._ATTACHED.pop(slot.name).close()
        slot.close()
        slot.unlink()


def test_it_keeps_memory_flat_whatever_the_dataset_size(tmp_path):
    """Peak Python/numpy memory of a build does not grow with the number of images (LMDB pages are
    the OS's file cache, not the builder's memory)."""
    import io
    import tracemalloc

    buf = io.BytesIO()
    noise_image((64, 48)).save(buf, format="JPEG")

    def peak(count: int) -> int:
        root = tmp_path / f"src{count}"
        for name in ("a", "b"):
            (root / name).mkdir(parents=True)
            for i in range(count // 2):
                (root / name / f"{i}.jpg").write_bytes(buf.getvalue())
        plan = plan_folder(root, SplitOptions(val_percent=0))
        tracemalloc.start()
        build_lmdbs(
            plan.splits,
            plan.labels,
            tmp_path / f"out{count}",
            name="m",
            workers=0,
            limits=ImageLimits(max_pixels=10**7),
            options=ImageOptions(width=64, height=64, channels=3, encoding="none"),
        )
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    small, large = peak(800), peak(3200)
    assert large < small * 1.25, (small, large)
