"""Dataset versions on disk: the build's record digests, a version's images and labels, the
folder a version's runs train from (docs/design.md, "Dataset versions"; the format is
trainer/versions.py's).

Version 1 is the build itself (its folder, no overlay). A later version is a small folder,
`<dataset>/versions/<n>/`, whose `dataset.json` points at the build's LMDBs and whose
`overlay.json` lists, per split, the build's images it holds and their new labels. An image is
named by its place in the build, (split, index), in every version.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import lmdb

from datasets.models import Dataset, DatasetVersion
from trainer.protocol import TASK_TRAITS
from trainer.versions import OVERLAY_FILE, OVERLAY_FORMAT, Place, read_records, version_digest
from workbench.core.errors import RequestError

SPLIT_ORDER = ("train", "val", "test")
RECORDS_FILE = "records.json"  # per split: each build record's digest and label, in key order
log = logging.getLogger(__name__)


@dataclass
class Contents:
    """What a version holds: per split, the build's images in order; and the new labels."""

    entries: dict[str, list[Place]]
    relabel: dict[Place, int] = field(default_factory=dict)

    def where(self) -> dict[Place, str]:
        """Each image's split in this version."""
        return {place: split for split, places in self.entries.items() for place in places}


def _base_meta(folder: Path) -> dict:
    return json.loads((folder / "dataset.json").read_text(encoding="utf-8"))


def write_records(folder: Path) -> dict:
    """Digests and labels of every build record (one pass over the LMDBs, written whole)."""
    records = {}
    for split, spec in _base_meta(folder).get("splits", {}).items():
        targets = folder / spec["targets_db"] if spec.get("targets_db") else None
        digests, labels = read_records(folder / spec["db"], targets)
        records[split] = {"digests": digests, "labels": labels}
    temp = folder / f".{RECORDS_FILE}.tmp"
    temp.write_text(json.dumps(records), encoding="utf-8")
    os.replace(temp, folder / RECORDS_FILE)
    return records


def records_of(dataset: Dataset) -> dict:
    """The build's records (made now for a dataset built before versions existed)."""
    path = dataset.path / RECORDS_FILE
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    return write_records(dataset.path)


def build_contents(records: dict) -> Contents:
    return Contents({split: [(split, i) for i in range(len(r["digests"]))] for split, r in records.items()})


def contents_of(version: DatasetVersion, records: dict | None = None) -> Contents:
    if version.number == 1:
        return build_contents(records if records is not None else records_of(version.dataset))
    overlay = json.loads((version.path / OVERLAY_FILE).read_text(encoding="utf-8"))
    entries = {split: [(place[0], place[1]) for place in places] for split, places in overlay["splits"].items()}
    return Contents(entries, {(s, i): label for s, i, label in overlay.get("relabel", [])})


def digest_of(contents: Contents, records: dict) -> str:
    digests = {split: r["digests"] for split, r in records.items()}
    return version_digest(contents.entries, image_digests=digests, labels=contents.relabel)


def split_counts(contents: Contents, records: dict, *, classes: int, task: str) -> dict:
    """Dataset.splits' shape for a version: counts, and class counts where each image has one
    label (classification; boxes and masks count otherwise)."""
    out = {}
    for split, places in contents.entries.items():
        if not places:
            continue
        row: dict = {"count": len(places)}
        if not TASK_TRAITS[task].targets_db:  # each image's one label is in its record
            labels = Counter(contents.relabel.get(p, records[p[0]]["labels"][p[1]]) for p in places)
            row["class_counts"] = [labels.get(c, 0) for c in range(classes)]
        out[split] = row
    return out


def first_version(dataset: Dataset) -> DatasetVersion | None:
    """Version 1, the build, with its digest (made once; reads every record of an older build);
    None when the build's folder cannot be read (a damaged database: its page says so elsewhere)."""
    version = dataset.versions.filter(number=1).first()
    if version is not None:
        return version
    if dataset.status != Dataset.Status.READY or not (dataset.path / "dataset.json").is_file():
        return None
    try:
        records = records_of(dataset)
    except (OSError, ValueError, KeyError, lmdb.Error):
        log.exception("dataset %s: its records cannot be read for version 1", dataset.pk)
        return None
    contents = build_contents(records)
    version, _ = DatasetVersion.objects.get_or_create(
        dataset=dataset,
        number=1,
        defaults={"digest": digest_of(contents, records), "splits": dataset.splits, "note": "the build"},
    )
    return version


def _in_build_order(place: Place) -> tuple[int, int]:
    return SPLIT_ORDER.index(place[0]) if place[0] in SPLIT_ORDER else len(SPLIT_ORDER), place[1]


def apply_fixes(contents: Contents, fixes: list[dict], *, records: dict, number: int) -> Contents:
    """The contents after `fixes` (datasets.validators.clean_fixes), each split kept in the
    build's order: a version's digest does not depend on the order its fixes came in. A fix of
    an image the version does not hold is refused, naming it."""
    where = contents.where()  # place -> split: the truth while fixing, the lists rebuilt after
    relabel = dict(contents.relabel)
    for n, fix in enumerate(fixes):
        place = (fix["split"], fix["index"])
        if place[0] not in records or place[1] >= len(records[place[0]]["digests"]):
            raise RequestError(f"fixes.{n}.index", f"the build's {place[0]} split has no image {place[1]}")
        if place not in where:
            raise RequestError(f"fixes.{n}", f"{place[0]} image {place[1]} is not in version {number} (dropped)")
        if fix["op"] == "drop":
            del where[place]
        elif fix["op"] == "move":
            where[place] = fix["to"]
        elif fix["label"] == records[place[0]]["labels"][place[1]]:
            relabel.pop(place, None)  # back to the build's label
        else:
            relabel[place] = fix["label"]
    entries: dict[str, list[Place]] = {split: [] for split in contents.entries}
    for place, split in where.items():
        entries.setdefault(split, []).append(place)
    for places in entries.values():
        places.sort(key=_in_build_order)
    return Contents(entries, {place: label for place, label in relabel.items() if place in where})


def latest_version(dataset: Dataset) -> DatasetVersion | None:
    """What a new run trains on: the latest version; None while the dataset is not built."""
    return dataset.versions.order_by("-number").first() or first_version(dataset)


def write_folder(dataset: Dataset, number: int, contents: Contents, splits: dict) -> Path:
    """The version's folder, written whole in a temporary folder and renamed into place."""
    return write_overlay_folder(dataset, dataset.path / "versions" / str(number), contents, splits, number=number)


def write_overlay_folder(dataset: Dataset, final: Path, contents: Contents, splits: dict, *, number: int = 0) -> Path:
    """A dataset folder at `final` (below the build's) that reads the build's LMDBs through an
    overlay holding `contents`: a version's, or a label check's fold (workbench/labelchecks)."""
    base = _base_meta(dataset.path)
    up = os.path.relpath(dataset.path, final) + "/"  # from the folder to the build's
    specs = base.get("splits", {})
    sources = {split: up + spec["db"] for split, spec in specs.items()}
    targets = {split: up + spec["targets_db"] for split, spec in specs.items() if spec.get("targets_db")}
    meta = dict(base)
    meta["splits"] = {}
    for split, row in splits.items():
        # A split the build did not have (images moved into `test`) reads only through the overlay.
        spec = dict(specs.get(split) or next(iter(specs.values())))
        meta["splits"][split] = {
            "db": up + spec["db"],
            **({"targets_db": up + spec["targets_db"]} if spec.get("targets_db") else {}),
            "count": row["count"],
            **({"class_counts": row["class_counts"]} if "class_counts" in row else {}),
        }
    meta["mean"] = {kind: up + name for kind, name in (base.get("mean") or {}).items() if name}
    meta["overlay"] = OVERLAY_FILE
    if number:
        meta["version"] = number
    overlay = {
        "format_version": OVERLAY_FORMAT,
        "sources": sources,
        "targets": targets,
        "splits": {split: [list(p) for p in places] for split, places in contents.entries.items() if places},
        "relabel": [[s, i, label] for (s, i), label in sorted(contents.relabel.items())],
    }
    final.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    (temp / "dataset.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    (temp / OVERLAY_FILE).write_text(json.dumps(overlay), encoding="utf-8")
    if final.exists():  # left by a version whose row was never written
        shutil.rmtree(final)
    os.replace(temp, final)
    return final


def remove_folder(version: DatasetVersion) -> None:
    if version.number > 1:
        shutil.rmtree(version.path, ignore_errors=True)
