"""Read a dataset folder (as written by the datasets app, or a bare DIGITS dataset job folder).

Layout (see docs/formats.md, "Dataset folder"):
    dataset.json, labels.txt, train_db/, val_db/, [test_db/], mean.npy, mean.png, mean.binaryproto
A DIGITS job folder has no dataset.json; everything it would say is inferred from the first LMDB
record, labels.txt and mean.binaryproto, so imported DIGITS datasets train unchanged.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from trainer.datum import DatumError, DatumLMDB, decode_datum, read_mean_blobproto
from trainer.protocol import CLASSIFICATION, TASK_TRAITS, TASKS
from trainer.versions import OverlayError, SplitOverlay, read_overlay

FORMAT_VERSION = 1
RESIZE_MODES = ("squash", "crop", "fill", "half_crop")
ENCODINGS = ("none", "png", "jpg")
SPLITS = ("train", "val", "test")


class DatasetFolderError(ValueError):
    """The folder is not a usable dataset; the message names the file and field."""


@dataclass(frozen=True)
class SplitInfo:
    db: Path
    count: int
    class_counts: list[int] | None = None  # None when unknown (bare DIGITS folders)
    # Detection and segmentation: the targets' Datum LMDB, with the images' keys (trainer/targets.py).
    targets_db: Path | None = None
    # `<split>_names.json`: each image's source path in key order, where the build knew it (not
    # for imported LMDBs); a test's galleries name the images by it.
    names: Path | None = None
    # A dataset version's split (trainer/versions.py): which of the build's images it holds.
    overlay: SplitOverlay | None = None


@dataclass(frozen=True)
class DatasetInfo:
    path: Path
    name: str
    image_width: int
    image_height: int
    channels: int
    resize_mode: str
    encoding: str
    labels: list[str]
    splits: dict[str, SplitInfo]
    mean_npy: Path | None = None
    mean_png: Path | None = None
    mean_binaryproto: Path | None = None
    from_digits: bool = False
    extra: dict = field(default_factory=dict)
    task: str = CLASSIFICATION

    @property
    def num_classes(self) -> int:
        return len(self.labels)

    def mean_image(self) -> np.ndarray | None:
        """The train mean as float32 C x H x W RGB (0..255), or None when the folder has none."""
        if self.mean_npy is not None and self.mean_npy.exists():
            mean = np.load(self.mean_npy).astype(np.float32)
        elif self.mean_binaryproto is not None and self.mean_binaryproto.exists():
            mean = read_mean_blobproto(self.mean_binaryproto)
        else:
            return None
        if mean.shape != (self.channels, self.image_height, self.image_width):
            raise DatasetFolderError(
                f"{self.path}: mean image is {mean.shape}, expected "
                f"{(self.channels, self.image_height, self.image_width)}"
            )
        return mean


def _read_labels(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()  # DIGITS writes a trailing newline; some tools add blank lines
    labels = [line.strip() for line in lines]
    if not labels:
        raise DatasetFolderError(f"{path}: no labels")
    return labels


def _require(obj: dict, key: str, kind: type | tuple[type, ...], where: str):
    if key not in obj:
        raise DatasetFolderError(f"{where}: missing field '{key}'")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise DatasetFolderError(f"{where}: field '{key}' has the wrong type ({type(value).__name__})")
    return value


def _split(root: Path, split: str, spec: dict, *, labels: list, task: str, where: str) -> SplitInfo:
    if split not in SPLITS:
        raise DatasetFolderError(f"{where}: unknown split {split!r} (known: {', '.join(SPLITS)})")
    db = root / _require(spec, "db", str, f"{where} splits.{split}")
    if not db.exists():
        raise DatasetFolderError(f"{where}: splits.{split}.db {db.name!r} does not exist")
    counts = spec.get("class_counts")
    if counts is not None and len(counts) != len(labels):
        raise DatasetFolderError(
            f"{where}: splits.{split}.class_counts has {len(counts)} entries for {len(labels)} labels"
        )
    targets = None
    if TASK_TRAITS[task].targets_db:
        targets = root / _require(spec, "targets_db", str, f"{where} splits.{split}")
        if not targets.exists():
            raise DatasetFolderError(f"{where}: splits.{split}.targets_db {targets.name!r} does not exist")
    names = root / f"{split}_names.json"
    return SplitInfo(
        db=db,
        count=int(spec.get("count", 0)),
        class_counts=counts,
        targets_db=targets,
        names=names if names.is_file() else None,
    )


def _from_json(root: Path) -> DatasetInfo:
    where = str(root / "dataset.json")
    try:
        meta = json.loads((root / "dataset.json").read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetFolderError(f"{where}: not valid JSON ({exc})") from None
    if meta.get("format_version") != FORMAT_VERSION:
        raise DatasetFolderError(
            f"{where}: format_version {meta.get('format_version')!r} is not supported (expected 1)"
        )
    channels = _require(meta, "channels", int, where)
    if channels not in (1, 3):
        raise DatasetFolderError(f"{where}: channels {channels} is not one of 1, 3")
    resize_mode = meta.get("resize_mode", "squash")
    if resize_mode not in RESIZE_MODES:
        raise DatasetFolderError(f"{where}: resize_mode {resize_mode!r} is not one of {', '.join(RESIZE_MODES)}")
    encoding = meta.get("encoding", "none")
    if encoding not in ENCODINGS:
        raise DatasetFolderError(f"{where}: encoding {encoding!r} is not one of {', '.join(ENCODINGS)}")
    task = meta.get("task", CLASSIFICATION)
    if task not in TASKS:
        raise DatasetFolderError(f"{where}: task {task!r} is not one of {', '.join(TASKS)}")
    labels = _require(meta, "labels", list, where)
    if not labels:
        raise DatasetFolderError(f"{where}: labels is empty")
    splits = {
        split: _split(root, split, spec, labels=labels, task=task, where=where)
        for split, spec in _require(meta, "splits", dict, where).items()
    }
    if "train" not in splits:
        raise DatasetFolderError(f"{where}: no train split")
    if meta.get("overlay"):
        try:
            overlays = read_overlay(root, str(meta["overlay"]))
        except OverlayError as exc:
            raise DatasetFolderError(str(exc)) from None
        splits = {split: replace(info, overlay=overlays.get(split)) for split, info in splits.items()}
    mean = meta.get("mean") or {}

    def mean_path(kind: str) -> Path | None:
        return root / mean[kind] if mean.get(kind) else None

    return DatasetInfo(
        path=root,
        name=str(meta.get("name", root.name)),
        image_width=_require(meta, "image_width", int, where),
        image_height=_require(meta, "image_height", int, where),
        channels=channels,
        resize_mode=resize_mode,
        encoding=encoding,
        labels=[str(x) for x in labels],
        splits=splits,
        mean_npy=mean_path("npy"),
        mean_png=mean_path("png"),
        mean_binaryproto=mean_path("binaryproto"),
        extra={k: v for k, v in meta.items() if k not in _KNOWN_KEYS},
        task=task,
    )


_KNOWN_KEYS = {
    "format_version",
    "name",
    "image_width",
    "image_height",
    "channels",
    "resize_mode",
    "encoding",
    "labels",
    "splits",
    "mean",
    "task",
    "overlay",
}


def _encoding_of(raw_value: bytes) -> str:
    from trainer.datum import Datum  # the runtime-built message class

    datum = Datum()
    datum.ParseFromString(raw_value)
    if not datum.encoded:
        return "none"
    return "png" if datum.data[:8] == b"\x89PNG\r\n\x1a\n" else "jpg"


def _from_digits(root: Path) -> DatasetInfo:
    labels_file = root / "labels.txt"
    if not labels_file.exists():
        raise DatasetFolderError(f"{root}: neither dataset.json nor labels.txt found")
    labels = _read_labels(labels_file)
    splits: dict[str, SplitInfo] = {}
    first: tuple[bytes, bytes] | None = None
    for split in SPLITS:
        db_path = root / f"{split}_db"
        if not db_path.exists():
            continue
        db = DatumLMDB(db_path)
        try:
            count = db.entries()
            if count and first is None:
                first = db.first()
        finally:
            db.close()
        if count:
            splits[split] = SplitInfo(db=db_path, count=count)
    if "train" not in splits or first is None:
        raise DatasetFolderError(f"{root}: train_db is missing or empty")
    try:
        chw, _ = decode_datum(first[1], key=first[0])
    except DatumError as exc:
        raise DatasetFolderError(f"{root / 'train_db'}: {exc}") from None
    binaryproto = root / "mean.binaryproto"
    return DatasetInfo(
        path=root,
        name=root.name,
        image_width=chw.shape[2],
        image_height=chw.shape[1],
        channels=chw.shape[0],
        resize_mode="squash",
        encoding=_encoding_of(first[1]),
        labels=labels,
        splits=splits,
        mean_npy=root / "mean.npy" if (root / "mean.npy").exists() else None,
        mean_binaryproto=binaryproto if binaryproto.exists() else None,
        from_digits=True,
    )


def load_dataset_folder(path: str | os.PathLike[str]) -> DatasetInfo:
    """Describe a dataset folder; raises DatasetFolderError naming what is wrong."""
    root = Path(path)
    if not root.is_dir():
        raise DatasetFolderError(f"{root}: dataset folder not found")
    if (root / "dataset.json").exists():
        return _from_json(root)
    return _from_digits(root)
