"""A dataset version's folder (trainer/versions.py): the trainer reads the build's LMDBs through
its overlay, with the images it holds, in its order, and its new labels; boxes follow their
images; a broken overlay is refused naming the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.task_data import make_task_folder
from tests.trainer.conftest import make_config
from trainer.dataset_folder import DatasetFolderError, load_dataset_folder
from trainer.datum import DatumLMDB
from trainer.events import ListReporter
from trainer.protocol import EXIT_DONE
from trainer.run import train
from trainer.targets import decode_boxes
from trainer.tasks import task_for
from trainer.versions import OVERLAY_FILE


def write_version(build: Path, folder: Path, splits: dict[str, list], relabel: list | None = None) -> Path:
    """A version folder by hand, as the datasets app writes one (docs/design.md)."""
    folder.mkdir(parents=True)
    meta = json.loads((build / "dataset.json").read_text())
    up = "../../"  # versions/<n>/ -> the build
    specs = meta["splits"]
    meta["splits"] = {
        split: {**specs.get(split, specs["train"]), "db": up + specs.get(split, specs["train"])["db"], "count": len(p)}
        for split, p in splits.items()
    }
    for spec in meta["splits"].values():
        if "targets_db" in spec:
            spec["targets_db"] = up + spec["targets_db"]
        spec.pop("class_counts", None)
    meta["mean"] = {kind: up + name for kind, name in (meta.get("mean") or {}).items()}
    meta["overlay"] = OVERLAY_FILE
    overlay = {
        "format_version": 1,
        "sources": {split: up + spec["db"] for split, spec in specs.items()},
        "targets": {split: up + spec["targets_db"] for split, spec in specs.items() if "targets_db" in spec},
        "splits": splits,
        "relabel": relabel or [],
    }
    (folder / "dataset.json").write_text(json.dumps(meta))
    (folder / OVERLAY_FILE).write_text(json.dumps(overlay))
    return folder


def test_it_reads_a_version_through_its_overlay_and_trains_on_it(tmp_path, gray8):
    build = shutil.copytree(gray8, tmp_path / "ds")
    train_places = [["train", i] for i in range(1, 48)] + [["val", 0]]  # train 0 dropped, val 0 moved in
    folder = build / "versions" / "2"
    write_version(build, folder, {"train": train_places, "val": [["val", i] for i in range(1, 12)]},
                  relabel=[["train", 5, 2]])  # fmt: skip
    info = load_dataset_folder(folder)
    task = task_for(info.task)
    cfg = make_config(tmp_path / "run", folder, epochs=1)
    train_set = task.dataset(info, "train", cfg=cfg, train=False)
    build_train, build_val = DatumLMDB(gray8 / "train_db"), DatumLMDB(gray8 / "val_db")
    try:
        assert len(train_set) == 48 and len(task.dataset(info, "val", cfg=cfg, train=False)) == 11
        image, label = train_set[0]
        assert (image.numpy() == build_train[1][0]).all() and label == build_train[1][1]
        assert train_set[4][1] == 2  # the build's train 5, relabelled
        assert build_train[5][1] != 2
        assert (train_set[47][0].numpy() == build_val[0][0]).all()
    finally:
        build_train.close(), build_val.close(), train_set.close()
    reporter = ListReporter()
    assert train(make_config(tmp_path / "run", folder, epochs=1), reporter=reporter) == EXIT_DONE


def test_it_keeps_each_images_boxes_with_it(tmp_path):
    build = make_task_folder(tmp_path / "shapes", task="detection", train=6, val=3)
    folder = build / "versions" / "2"
    write_version(build, folder, {"train": [["train", 0], ["val", 2]], "val": [["val", 0]]})
    info = load_dataset_folder(folder)
    task = task_for(info.task)
    cfg = make_config(tmp_path / "run", folder, network="fasterrcnn_mobilenet_v3_large_320_fpn")
    moved = task.dataset(info, "train", cfg=cfg, train=False)
    targets = DatumLMDB(build / "val_targets_db")
    try:
        assert len(moved) == 2
        _, target = moved[1]
        assert target["boxes"].tolist() == decode_boxes(targets.raw(2), where="val 2")[:, 1:5].tolist()
    finally:
        moved.close(), targets.close()


def test_it_refuses_an_overlay_naming_a_split_it_has_no_source_for(tmp_path, gray8):
    build = shutil.copytree(gray8, tmp_path / "ds")
    folder = build / "versions" / "2"
    write_version(build, folder, {"train": [["test", 0]]})
    with pytest.raises(DatasetFolderError, match=r"overlay.json: splits.train names images of \['test'\]"):
        load_dataset_folder(folder)
