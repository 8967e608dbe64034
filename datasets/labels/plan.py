"""From a read label source to the build's plan: the class table applied, the images split into
train/val/test, each image's target ready for the worker, and what was left out and why.

No Django here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np

from datasets.labels import detect_format, read_labels
from datasets.labels.classes import class_preview, class_table
from datasets.labels.common import LabelError, LabelReport, LabelSource
from datasets.labels.files import resolved_within
from datasets.labels.prepare import MaskTarget
from datasets.labels.registry import format_choices, format_for_task, label_format
from datasets.names import LINK_NOT_FOLLOWED
from trainer.protocol import DETECTION, IGNORE_INDEX

# Problems whose file is left out of the build (the others change a box or a pixel, not an image).
SKIPPING_KINDS = ("missing_image", "missing_mask", "bad_mask", "bad_file", "link", "unlisted")
SPLITS = ("train", "val", "test")


@dataclass
class AnnotatedPlan:
    task: str
    labels: list[str]
    splits: dict[str, list[tuple[str, int, object]]]  # split -> (image path, -1, target)
    skipped: list[dict] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.splits.values())


def plan_annotated(
    source: LabelSource,
    *,
    class_map: dict | None,
    val_percent: int,
    test_percent: int,
    seed: int = 0,
    shuffle: bool = True,
) -> AnnotatedPlan:
    """LabelError when nothing usable remains (no image, or every class ignored)."""
    table = class_table(source.classes, class_map)
    skipped = [{"path": p.file, "reason": p.message} for p in source.report.problems if p.kind in SKIPPING_KINDS]
    if not source.images:
        reasons = "; ".join(sorted({s["reason"] for s in skipped})[:3])
        raise LabelError("no usable annotated images" + (f"; e.g. {reasons}" if reasons else ""))
    if source.task == DETECTION:
        targets = [_boxes(image.boxes, table.index) for image in source.images]
    else:
        lookup = np.full(256, IGNORE_INDEX, dtype=np.uint8)
        for i, name in enumerate(source.classes[:IGNORE_INDEX]):
            lookup[i] = IGNORE_INDEX if table.index[name] is None else table.index[name]
        targets = [
            MaskTarget(image.mask, source.mask_format, lookup.tobytes(), image.shapes, (image.width, image.height))
            for image in source.images
        ]
    # In name order before the shuffle: the split depends on the images' names and the seed alone,
    # not on the order a reader met them (COCO's JSON lists its images in its own order, the other
    # readers in their folders' name order, so the same images with the same seed split apart).
    named = sorted(zip(source.images, targets, strict=True), key=lambda pair: split_key(pair[0].name))
    entries = [(image.path, -1, target) for image, target in named]
    if any(image.split for image in source.images):  # the source's own train/ val/ folders or lists
        given = {s: [e for e, (i, _) in zip(entries, named, strict=True) if i.split == s] for s in SPLITS}
        return AnnotatedPlan(source.task, table.labels, {s: v for s, v in given.items() if v}, skipped)
    if shuffle:
        random.Random(seed).shuffle(entries)
    n = len(entries)
    n_test = int(round(n * test_percent / 100))
    n_val = int(round(n * val_percent / 100))
    if n_test + n_val >= n:  # keep one image for training at least
        n_val = max(0, n - n_test - 1)
        n_test = min(n_test, n - 1 - n_val)
    splits = _held_out(entries, {"test": n_test, "val": n_val})
    return AnnotatedPlan(source.task, table.labels, {s: splits[s] for s in SPLITS if splits[s]}, skipped)


def _classes_of(entry: tuple) -> frozenset[int]:
    """The classes an entry's boxes hold (ignore regions aside); none known for a mask."""
    target = entry[2]
    if not isinstance(target, np.ndarray):
        return frozenset()
    return frozenset(int(row[0]) for row in target if not row[5])


def _held_out(entries: list[tuple], sizes: dict[str, int]) -> dict[str, list[tuple]]:
    """Test, then validation, of `sizes` images each from the shuffled `entries`, the rest to
    train. Each held-out split first takes, rarest class first, one image of every class that
    at least two remaining images hold (so one stays to train on), then fills up in shuffled
    order: a cut alone left a class of a small detection set out of validation, and its AP was
    never measured. Masks' classes are not known before they are decoded: a mask set is cut."""
    remaining, splits = list(entries), {}
    for split, size in sizes.items():
        chosen: list[int] = []  # indexes into remaining
        holders: dict[int, list[int]] = {}
        for index, entry in enumerate(remaining):
            for cls in _classes_of(entry):
                holders.setdefault(cls, []).append(index)
        covered: set[int] = set()
        for cls, indexes in sorted(holders.items(), key=lambda item: (len(item[1]), item[0])):
            if len(chosen) < size and cls not in covered and len(indexes) >= 2:
                chosen.append(indexes[0])
                covered |= _classes_of(remaining[indexes[0]])
        taken = set(chosen)
        chosen += [i for i in range(len(remaining)) if i not in taken][: size - len(chosen)]
        taken.update(chosen)
        splits[split] = [remaining[i] for i in sorted(chosen)]
        remaining = [entry for i, entry in enumerate(remaining) if i not in taken]
    splits["train"] = remaining
    return splits


def split_key(name: str) -> tuple[str, str]:
    """An image's place before the shuffle: its file name, then its whole relative name. By file
    name first, so the same images in each format's folders (KITTI's image_2/, YOLO's images/train/,
    COCO's images/) take the same places."""
    return PurePosixPath(name).name, name


def _boxes(boxes, index: dict[str, int | None]) -> np.ndarray:
    """N x 6 (class, x1, y1, x2, y2, ignore) in the source's pixels. A region without a class
    (DontCare) or of an ignored class is an ignore region of class 0 (its class is not read)."""
    rows = []
    for box in boxes:
        target = index.get(box.class_name) if box.class_name is not None else None
        ignore = box.ignore or target is None
        rows.append((0 if target is None else target, box.x1, box.y1, box.x2, box.y2, 1.0 if ignore else 0.0))
    return np.asarray(rows, dtype=np.float32).reshape(-1, 6)


def split_folders(root: Path) -> dict[str, Path]:
    """DIGITS's layout of separate splits, `train/` (and `val/`, `test/`) each holding the labels in
    one format: {split: folder}; {} when the root holds the labels itself."""
    if detect_format(root) is not None or not (root / "train").is_dir() or detect_format(root / "train") is None:
        return {}
    return {split: root / split for split in SPLITS if (root / split).is_dir()}


def read_source(
    root: Path, *, task: str, fmt: str = "auto", min_box_size: float = 0, allowed_roots: list[Path] | None = None
) -> LabelSource:
    """Read a folder of `task` labels in `fmt` ("auto": detected); LabelError says why it cannot.
    With train/ (val/, test/) folders each in the format, the images keep their folder's split.

    The root is resolved here, once, and checked against `allowed_roots` (None: unrestricted) in
    the same step (datasets.labels.files.resolved_within): below it no link is followed, a linked
    train/ included, so what is read stays inside the folder the import roots allowed."""
    root = resolved_within(root, allowed_roots, LabelError)
    folders = split_folders(root)
    linked = [split for split, folder in folders.items() if folder.is_symlink()]
    if linked:  # named here; a folder swapped for a link later is still refused at each open
        raise LabelError(f"{linked[0]}: {LINK_NOT_FOLLOWED}")
    if not folders:
        return _read_one(root, task=task, fmt=fmt, min_box_size=min_box_size)
    sources = {
        split: _read_one(folder, task=task, fmt=fmt, min_box_size=min_box_size) for split, folder in folders.items()
    }
    train = sources["train"]
    classes = list(train.classes)
    if task == DETECTION:
        classes = sorted({name for source in sources.values() for name in source.classes})
    report = LabelReport()
    images = []
    for split, source in sources.items():
        if task != DETECTION and source.classes != train.classes:
            raise LabelError(f"{split}/ names other classes than train/ ({', '.join(source.classes[:10])})")
        for problem in source.report.problems:
            report.add(f"{split}/{problem.file}", problem.line, problem.kind, problem.message)
        for image in source.images:
            image.name, image.split = f"{split}/{image.name}", split
            images.append(image)
    return LabelSource(task, train.format, classes, images, report, mask_format=train.mask_format)


def _read_one(root: Path, *, task: str, fmt: str, min_box_size: float) -> LabelSource:
    if fmt == "auto":
        detected = detect_format(root)
        if detected is None:
            raise LabelError(
                "no detection or segmentation labels found: expected one of "
                + "; ".join(label for _, label in format_choices())
            )
        fmt = format_for_task(detected, task)  # COCO's JSON given as segmentation: its polygons
    record = label_format(fmt)
    if record.task != task:
        raise LabelError(f"the source holds {fmt} labels, which are for {record.task}, not {task}")
    return read_labels(root, fmt, min_box_size=min_box_size)


def annotated_plan(
    root: Path,
    *,
    task: str,
    fmt: str,
    class_map: dict | None,
    min_box_size: float,
    val_percent: int,
    test_percent: int,
    seed: int,
    shuffle: bool,
    allowed_roots: list[Path] | None = None,
) -> tuple[AnnotatedPlan, dict]:
    """The build's plan and the label check it stores (label_report.json): the class table's
    preview and the report by file and line."""
    source = read_source(root, task=task, fmt=fmt, min_box_size=min_box_size, allowed_roots=allowed_roots)
    plan = plan_annotated(
        source, class_map=class_map, val_percent=val_percent, test_percent=test_percent, seed=seed, shuffle=shuffle
    )
    return plan, {**class_preview(source, class_map), "min_box_size": min_box_size}


def label_check(
    root: Path,
    *,
    task: str,
    fmt: str = "auto",
    class_map: dict | None = None,
    min_box_size: float = 0,
    allowed_roots: list[Path] | None = None,
):
    """What the wizard, the API and the CLI show before anything is built: each class with its
    count and where the class table sends it, and every label problem by file and line."""
    source = read_source(root, task=task, fmt=fmt, min_box_size=min_box_size, allowed_roots=allowed_roots)
    return {**class_preview(source, class_map), "min_box_size": min_box_size}
