"""The class table: rename, merge and ignore a source's classes before the build.

A class map is {source class: new name}; two classes given the same new name are merged; a class
mapped to "" or null is ignored (detection: its boxes become ignore regions, neither trained nor
counted as misses; segmentation: its pixels become 255). Classes the map leaves out keep their name.
"""

from __future__ import annotations

from dataclasses import dataclass

from datasets.labels.common import LabelError, LabelSource
from datasets.names import MAX_CLASS_NAME, class_name_problem, shown_name
from trainer.protocol import DETECTION

__all__ = ["MAX_CLASS_NAME", "ClassTable", "class_map_shape_errors", "class_preview", "class_table"]


@dataclass(frozen=True)
class ClassTable:
    labels: list[str]  # the dataset's classes, in the order of the source's first class for each
    index: dict[str, int | None]  # source class -> dataset class index (None: ignored)


def class_map_shape_errors(raw) -> list[str]:
    """What is wrong with a class map's shape (before the source's classes are known)."""
    if not isinstance(raw, dict):
        return ["give the class table as an object {source class: new name or null}"]
    errors = []
    for key, value in raw.items():
        # Keys name source classes, which passed the class-name rule when read: one that breaks it
        # names none (and is not echoed whole: it may be megabytes).
        if class_name_problem(key) is not None:
            errors.append(f"{shown_name(key)!r}: not a source class name ({class_name_problem(key)})")
        elif value is not None and not isinstance(value, str):
            errors.append(f"{shown_name(key)}: the new name must be text, or null to ignore the class")
        elif isinstance(value, str) and value.strip() and (problem := class_name_problem(value)) is not None:
            errors.append(f"{shown_name(key)}: the new name {shown_name(value)!r} is refused: {problem}")
    return errors


def class_table(classes: list[str], class_map: dict | None) -> ClassTable:
    """Apply `class_map` to the source's `classes`; LabelError names a class the source does not
    have, or says that nothing would be left."""
    class_map = class_map or {}
    unknown = sorted(set(class_map) - set(classes))
    if unknown:
        raise LabelError(
            f"class table: {', '.join(map(repr, unknown[:5]))} not among the source's classes "
            f"({', '.join(classes[:20])}{'...' if len(classes) > 20 else ''})"
        )
    labels: list[str] = []
    index: dict[str, int | None] = {}
    for name in classes:
        target = class_map.get(name, name)
        target = target.strip() if isinstance(target, str) else None
        if not target:
            index[name] = None
            continue
        if (problem := class_name_problem(target)) is not None:  # a map stored before the rule, or not by a form
            raise LabelError(f"class table: the new name of {shown_name(name)!r} is refused: {problem}")
        if target not in labels:
            labels.append(target)
        index[name] = labels.index(target)
    if not labels:
        raise LabelError("class table: every class is ignored; keep at least one")
    return ClassTable(labels, index)


def class_preview(source: LabelSource, class_map: dict | None) -> dict:
    """What the wizard and the API show before the build: each source class with its count and
    where it goes, the dataset's classes with theirs, and the label report."""
    counts = source.class_counts()
    table = class_table(source.classes, class_map)
    rows = []
    for name in source.classes:
        target = table.index[name]
        rows.append(
            {"name": name, "count": counts.get(name, 0), "maps_to": None if target is None else table.labels[target]}
        )
    label_counts = dict.fromkeys(table.labels, 0)
    if source.task == DETECTION:
        for name in source.classes:
            if table.index[name] is not None:
                label_counts[table.labels[table.index[name]]] += counts.get(name, 0)
    else:  # images holding a merged class count once, whichever of its source classes they hold
        for image in source.images:
            targets = {table.index[source.classes[i]] for i in image.present if i < len(source.classes)}
            for target in targets - {None}:
                label_counts[table.labels[target]] += 1
    return {
        "task": source.task,
        "format": source.format,
        "count_means": "instances" if source.task == DETECTION else "images containing the class",
        "count_unit": "objects" if source.task == DETECTION else "images",  # what one count is
        "images": len(source.images),
        "images_without_labels": sum(
            1 for i in source.images if not i.labelled or (source.task == DETECTION and not i.boxes)
        ),
        "classes": rows,
        "labels": [{"name": n, "count": c} for n, c in label_counts.items()],
        # Classes no image holds (VOC's 21 for a set that draws 3): each still gets an output of
        # the network; ignoring one in the class table leaves it out.
        "empty_classes": [n for n, c in label_counts.items() if c == 0],
        "report": source.report.as_dict(),
        # The source's own split (VOC's ImageSets lists), used instead of the percentages; None: none.
        "own_split": source.own_split,
    }
