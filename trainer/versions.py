"""Dataset versions: the contract between the datasets app, which writes a version, and the
trainer, which reads through it (docs/design.md, "Dataset versions").

A version is a folder (`<dataset>/versions/<n>/`) with a `dataset.json` like the build's and an
`overlay.json` that says, per split, which of the build's images it holds, in order, and which
of them carry another label. Its images stay in the build's LMDBs: a fix (drop, relabel, move to
another split) rebuilds nothing. An image is named by its place in the build, (split, index),
in every version, so a fix found on one version (a duplicate, a suspect) applies to any other.

    overlay.json: {"format_version": 1,
                   "sources": {"train": "../../train_db", ...},     # the build's LMDB per split
                   "targets": {"train": "../../train_targets_db"},  # detection, segmentation
                   "splits": {"train": [["train", 0], ["val", 7], ...], ...},
                   "relabel": [["train", 3, 1], ...]}              # classification: a new label
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trainer.datum import Datum, DatumLMDB, decode_datum

OVERLAY_FILE = "overlay.json"
OVERLAY_FORMAT = 1

Place = tuple[str, int]  # (the build's split, the image's index in it)


class OverlayError(ValueError):
    """The overlay is not usable; the message names the file and what is wrong."""


@dataclass(frozen=True)
class SplitOverlay:
    """One split of a version: the build's images it holds, in order, and new labels."""

    entries: tuple[Place, ...]
    sources: Mapping[str, Path]
    targets: Mapping[str, Path] = field(default_factory=dict)
    relabel: Mapping[Place, int] = field(default_factory=dict)


class OverlaidLMDB:
    """A version's split read as one Datum LMDB (what DatumLMDB offers the tasks' datasets):
    item i is the build's image `entries[i]`, with its new label where it has one. Picklable for
    DataLoader workers like DatumLMDB, whose handles it opens lazily per process."""

    def __init__(self, overlay: SplitOverlay, *, targets: bool = False) -> None:
        self.overlay = overlay
        sources = overlay.targets if targets else overlay.sources
        self._dbs = {split: DatumLMDB(path) for split, path in sources.items()}
        # A targets LMDB holds boxes or masks: its records' labels mean nothing, none is replaced.
        self._relabel = {} if targets else dict(overlay.relabel)
        self.path = ", ".join(sorted(os.fspath(path) for path in sources.values()))

    def __len__(self) -> int:
        return len(self.overlay.entries)

    def _place(self, index: int) -> Place:
        return self.overlay.entries[index]

    def keys(self) -> list[bytes]:
        return [self._dbs[split].keys()[at] for split, at in self.overlay.entries]

    def raw(self, index: int) -> bytes:
        split, at = self._place(index)
        return self._dbs[split].raw(at)

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        split, at = self._place(index)
        db = self._dbs[split]
        image, label = decode_datum(db.raw(at), key=db.keys()[at])
        return image, self._relabel.get((split, at), label)

    def __iter__(self) -> Iterator[tuple[np.ndarray, int]]:
        for i in range(len(self)):
            yield self[i]

    def close(self) -> None:
        for db in self._dbs.values():
            db.close()

    def __repr__(self) -> str:
        return f"OverlaidLMDB({self.path!r}, {len(self)} images)"


def open_images(split_info) -> DatumLMDB | OverlaidLMDB:
    """The images (and labels) of a split (trainer.dataset_folder.SplitInfo) of a build or a version."""
    if split_info.overlay is None:
        return DatumLMDB(split_info.db)
    return OverlaidLMDB(split_info.overlay)


def open_targets(split_info) -> DatumLMDB | OverlaidLMDB:
    """The boxes or masks of a detection or segmentation split, in the images' order."""
    if split_info.overlay is None:
        return DatumLMDB(split_info.targets_db)
    return OverlaidLMDB(split_info.overlay, targets=True)


def _places(value: Any, where: str) -> tuple[Place, ...]:
    if not isinstance(value, list):
        raise OverlayError(f"{where}: not a list of [split, index] pairs")
    out = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and type(item[1]) is int):
            raise OverlayError(f"{where}: {item!r} is not a [split, index] pair")
        out.append((item[0], item[1]))
    return tuple(out)


def read_overlay(root: Path, name: str = OVERLAY_FILE) -> dict[str, SplitOverlay]:
    """Each split's overlay of the version folder `root`; raises OverlayError naming the problem."""
    where = str(root / name)
    try:
        meta = json.loads((root / name).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise OverlayError(f"{where}: cannot be read ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format_version") != OVERLAY_FORMAT:
        raise OverlayError(f"{where}: format_version is not {OVERLAY_FORMAT}")
    sources = {split: root / rel for split, rel in (meta.get("sources") or {}).items()}
    targets = {split: root / rel for split, rel in (meta.get("targets") or {}).items()}
    relabel: dict[Place, int] = {}
    for item in meta.get("relabel") or []:
        if not (isinstance(item, list) and len(item) == 3 and all(type(x) is int for x in item[1:])):
            raise OverlayError(f"{where}: relabel entry {item!r} is not [split, index, label]")
        relabel[(item[0], item[1])] = item[2]
    out = {}
    for split, value in (meta.get("splits") or {}).items():
        entries = _places(value, f"{where} splits.{split}")
        unknown = {place[0] for place in entries} - set(sources)
        if unknown:
            raise OverlayError(f"{where}: splits.{split} names images of {sorted(unknown)}, which has no source")
        out[split] = SplitOverlay(entries=entries, sources=sources, targets=targets, relabel=relabel)
    return out


def read_records(images: Path, targets: Path | None = None) -> tuple[list[str], list[int]]:
    """Each build record's digest and label, in key order, in one pass: the digest of its stored
    bytes (pixels and label) and, for detection and segmentation, its targets' (boxes or mask)."""
    image_db = DatumLMDB(images)
    target_db = DatumLMDB(targets) if targets is not None else None
    datum = Datum()
    try:
        digests, labels = [], []
        for index in range(len(image_db)):
            raw = image_db.raw(index)
            digest = hashlib.blake2b(raw, digest_size=16)
            if target_db is not None:
                digest.update(target_db.raw(index))
            digests.append(digest.hexdigest())
            datum.ParseFromString(raw)  # the label only: the pixels are not decoded
            labels.append(int(datum.label))
        return digests, labels
    finally:
        image_db.close()
        if target_db is not None:
            target_db.close()


def version_digest(
    entries: Mapping[str, list[Place]], *, image_digests: Mapping[str, list[str]], labels: Mapping[Place, int]
) -> str:
    """The content digest of a version: of every split's images (their build record's digest,
    which covers pixels, label and for detection and segmentation the targets) in order, and of
    every new label. Two versions that hold the same images with the same labels share it,
    whatever fixes led to them."""
    digest = hashlib.blake2b(digest_size=16)
    for split in sorted(entries):
        for place in entries[split]:
            relabelled = labels.get(place)
            line = f"{split}\t{image_digests[place[0]][place[1]]}\t{'' if relabelled is None else relabelled}\n"
            digest.update(line.encode())
    return digest.hexdigest()
