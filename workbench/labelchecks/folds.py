"""A label check's folds: every image of the checked version in exactly one fold, each class
spread evenly over the folds; each fold's dataset folder (trains on the others, validates on it)
and, once its run is done, the suspects from all held-out predictions (datasets/doctor/confident.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from django.conf import settings

from datasets.doctor.confident import find_suspects
from datasets.versions import Contents, split_counts, write_overlay_folder
from trainer.protocol import HELDOUT_FILE
from trainer.versions import Place
from workbench.labelchecks.models import LabelCheck

REPORTED = 1000  # suspects kept in the report, most doubtful first


def label_of(place: Place, contents: Contents, records: dict) -> int:
    return contents.relabel.get(place, records[place[0]]["labels"][place[1]])


def pool_of(contents: Contents) -> list[Place]:
    """Every image the version holds, in its splits' order."""
    return [place for split in ("train", "val", "test") for place in contents.entries.get(split, [])]


def assign(pool: list[Place], labels: list[int], folds: int, *, seed: int) -> list[list[Place]]:
    """Each class's images shuffled (by `seed`) and dealt round the folds."""
    rng = np.random.default_rng(seed)
    dealt: list[list[Place]] = [[] for _ in range(folds)]
    turn = 0
    for label in sorted(set(labels)):
        members = [place for place, given in zip(pool, labels, strict=True) if given == label]
        for place in (members[i] for i in rng.permutation(len(members))):
            dealt[turn % folds].append(place)
            turn += 1
    return dealt


def write_fold(check: LabelCheck, index: int, contents: Contents, held: list[Place], records: dict) -> tuple[str, list]:
    """Fold `index`'s folder: trains on every other image, validates on `held`; returns its path
    relative to DATA_DIR (Run.data_folder) and the held-out places in the order it predicts them."""
    held_set = set(held)
    pool = pool_of(contents)
    fold = Contents(
        {"train": [p for p in pool if p not in held_set], "val": [p for p in pool if p in held_set]},
        {place: label for place, label in contents.relabel.items()},
    )
    splits = split_counts(fold, records, classes=len(check.dataset.labels or []), task=check.dataset.task)
    folder = write_overlay_folder(check.dataset, check.folder / f"fold-{index}", fold, splits)
    return os.path.relpath(folder, settings.DATA_DIR), [list(p) for p in fold.entries["val"]]


def collect(check: LabelCheck, contents: Contents, records: dict) -> dict:
    """Confident learning over every fold's held-out predictions; the report, written whole."""
    places, probabilities = [], []
    for fold in check.fold_runs.select_related("run").order_by("index"):
        predicted = np.load(fold.run.run_dir / HELDOUT_FILE)
        if len(predicted) != len(fold.places):
            raise ValueError(f"fold {fold.index}: {len(predicted)} predictions for {len(fold.places)} images")
        places += [tuple(p) for p in fold.places]
        probabilities.append(predicted)
    labels = [label_of(place, contents, records) for place in places]
    every = np.concatenate(probabilities)
    found = find_suspects(labels, every)
    names = check.dataset.labels or []
    rows = []
    for i in found.order[: min(found.count, REPORTED)]:
        split, index = places[i]
        rows.append({
            "image": {"split": split, "index": index},
            "given": labels[i], "given_name": names[labels[i]],
            "suggested": int(found.suggested[i]), "suggested_name": names[int(found.suggested[i])],
            "self_confidence": round(float(found.self_confidence[i]), 4),
            "suggested_confidence": round(float(every[i, found.suggested[i]]), 4),
        })  # fmt: skip
    report = {"images": len(places), "folds": check.folds, "suspects_total": found.count, "suspects": rows,
              "joint": found.joint.tolist(), "labels": names}  # fmt: skip
    _write_json(check.report_path, report)
    return report


def _write_json(path: Path, value: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps(value), encoding="utf-8")
    os.replace(temp, path)


def read_report(check: LabelCheck) -> dict | None:
    try:
        return json.loads(check.report_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
