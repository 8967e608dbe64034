"""A dataset's duplicates report: every stored image of every split fingerprinted and paired
(duplicates.py), kept as `<dataset>/doctor/duplicates.json`, written whole or not at all.

A pair across splits is a leak: a validation or test image the network also trains on (or one
it is tested on twice). The report counts pairs per pair of splits and lists them, leaks first,
up to MAX_PAIRS (it says how many more there were)."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from datasets.doctor.duplicates import find_pairs, fingerprint
from datasets.gallery import thumbnail_data_url
from trainer.datum import DatumError, DatumLMDB, decode_datum

SPLITS = ("train", "val", "test")
MAX_PAIRS = 2000
MAX_IMAGES = 200_000
REPORT = Path("doctor") / "duplicates.json"
# A check that began this long ago and wrote nothing died with its worker: it may be asked again.
CHECK_EXPIRES_SECONDS = 3600


def _records(folder: Path, places: list[dict]) -> Iterator[np.ndarray]:
    """The stored images as HxWxC arrays, one at a time (a large dataset is never held whole),
    appending where each one is (split, index, key, label) to `places` as it goes."""
    for split in SPLITS:
        path = folder / f"{split}_db"
        if not (path / "data.mdb").is_file():
            continue
        db = DatumLMDB(path)
        try:
            for index, key in enumerate(db.keys()):
                chw, label = decode_datum(db.raw(index), key=key)
                places.append({"split": split, "index": index, "key": key.decode("ascii", "replace"), "label": label})
                yield chw.transpose(1, 2, 0)
        finally:
            db.close()


def _count(folder: Path) -> int:
    total = 0
    for split in SPLITS:
        path = folder / f"{split}_db"
        if (path / "data.mdb").is_file():
            db = DatumLMDB(path)
            try:
                total += db.entries()
            finally:
                db.close()
    return total


def scan(folder: Path) -> dict:
    """The report of the dataset in `folder` (a built dataset's)."""
    started = time.monotonic()
    count = _count(folder)
    if count > MAX_IMAGES:
        # Every image is compared with every other: 200,000 images are 2 x 10^10 comparisons.
        return {"error": f"{count:,} images: the check compares every pair, and is offered up to {MAX_IMAGES:,}"}
    places: list[dict] = []
    pairs = find_pairs(fingerprint(_records(folder, places)))
    rows = [
        {"kind": pair.kind, "bits": pair.bits, "correlation": pair.correlation,
         "a": places[pair.first], "b": places[pair.second]}
        for pair in pairs
    ]  # fmt: skip
    rows.sort(key=lambda row: row["a"]["split"] == row["b"]["split"])  # leaks first; stable otherwise
    counts = Counter("-".join(sorted((row["a"]["split"], row["b"]["split"]), key=SPLITS.index)) for row in rows)
    return {
        "images": len(places),
        "pairs_total": len(rows),
        "leaks": sum(row["a"]["split"] != row["b"]["split"] for row in rows),
        "exact": sum(row["kind"] == "exact" for row in rows),
        "counts": dict(sorted(counts.items())),
        "pairs": rows[:MAX_PAIRS],
        "seconds": round(time.monotonic() - started, 2),
        "checked_at": time.time(),
    }


def write(folder: Path, report: dict) -> None:
    target = folder / REPORT
    target.parent.mkdir(exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=target.parent, suffix=".tmp", delete=False, encoding="utf-8") as out:
        json.dump(report, out)
    os.replace(out.name, target)


def read(folder: Path) -> dict | None:
    try:
        return json.loads((folder / REPORT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def mark_checking(folder: Path) -> None:
    (folder / REPORT.parent).mkdir(exist_ok=True)
    (folder / REPORT.parent / "duplicates.checking").write_text(str(time.time()))


def clear_checking(folder: Path) -> None:
    (folder / REPORT.parent / "duplicates.checking").unlink(missing_ok=True)


def checking(folder: Path) -> bool:
    try:
        since = float((folder / REPORT.parent / "duplicates.checking").read_text())
    except (OSError, ValueError):
        return False
    return time.time() - since < CHECK_EXPIRES_SECONDS


def with_thumbnails(folder: Path, rows: list[dict], *, sides: tuple[str, ...] = ("a", "b")) -> list[dict]:
    """`rows` (pairs of the report, or a label check's suspects with sides=("image",)) with each
    image's thumbnail as `<side>_src` (None for one that can no longer be read), for the pages."""
    databases: dict[str, DatumLMDB] = {}
    try:
        shown = []
        for row in rows:
            sources = {}
            for side in sides:
                place = row[side]
                db = databases.setdefault(place["split"], DatumLMDB(folder / f"{place['split']}_db"))
                try:
                    chw, _ = decode_datum(db.raw(place["index"]), key=db.keys()[place["index"]])
                    sources[f"{side}_src"] = thumbnail_data_url(chw)
                except (DatumError, IndexError, OSError):
                    sources[f"{side}_src"] = None
            shown.append({**row, **sources})
        return shown
    finally:
        for db in databases.values():
            db.close()
