"""YOLO txt boxes: `images/` + `labels/` with the same relative names (`images/train/a.jpg` ->
`labels/train/a.txt`), one `class cx cy w h` line per object, the four numbers relative to the
image's width and height (0..1). Class names: `classes.txt` (one per line, the line is the id) or
`data.yaml`'s `names` (a list, or a mapping id -> name), at the top or in labels/.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from datasets.labels.common import (
    AnnotatedImage,
    Box,
    LabelError,
    LabelReport,
    LabelSource,
    checked_box,
    image_size,
    images_by_stem,
    labelled_text_files,
    read_text,
    relative_name,
)
from trainer.protocol import DETECTION


def yolo_class_file(root: Path) -> Path | None:
    for folder in (root, root / "labels"):
        for name in ("classes.txt", "data.yaml", "data.yml"):
            if (folder / name).is_file():
                return folder / name
    return None


def read_yolo_classes(path: Path, root: Path) -> list[str]:
    text = read_text(path, root)
    name = relative_name(path, root)
    if path.suffix == ".txt":
        names = [line.strip() for line in text.splitlines()]
        while names and not names[-1]:
            names.pop()
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise LabelError(f"{name}: not valid YAML ({str(exc).splitlines()[0]})") from None
        names = data.get("names") if isinstance(data, dict) else None
        if isinstance(names, dict):
            if not all(isinstance(k, int) for k in names) or sorted(names) != list(range(len(names))):
                raise LabelError(f"{name}: names must map the ids 0, 1, 2... to class names")
            names = [names[i] for i in range(len(names))]
        if not isinstance(names, list):
            raise LabelError(f"{name}: no list of names")
        names = [str(n).strip() for n in names]
    if not names or not all(names):
        raise LabelError(f"{name}: class names must not be empty")
    return names


def read_yolo(root: Path, *, min_box_size: float = 0) -> LabelSource:
    class_file = yolo_class_file(root)
    if class_file is None or not (root / "images").is_dir() or not (root / "labels").is_dir():
        raise LabelError("YOLO needs images/ and labels/ folders and classes.txt or data.yaml")
    classes = read_yolo_classes(class_file, root)
    report = LabelReport()
    labelled: dict[str, AnnotatedImage] = {}
    images = images_by_stem(root / "images")
    labelled_files = labelled_text_files(root, root / "images", images, root / "labels", report, skip=("classes.txt",))
    for stem, name, image, text in labelled_files:
        for number, line in enumerate(text.splitlines(), start=1):
            box = _parse_line(line, (name, number), classes, image.width, image.height, report)
            if box is not None:
                box = checked_box(report, (name, number), box, image.width, image.height, min_box_size)
            if box is not None:
                image.boxes.append(box)
        labelled[stem] = image
    found = []
    for stem, path in images.items():
        if stem in labelled:
            found.append(labelled[stem])
        elif (size := image_size(path)) is not None:
            found.append(AnnotatedImage(str(path), relative_name(path, root), *size, labelled=False))
    return LabelSource(DETECTION, "yolo", classes, found, report)


def _parse_line(line, where, classes: list[str], width: int, height: int, report: LabelReport) -> Box | None:
    fields = line.split()
    if not fields:
        return None
    if len(fields) != 5:
        report.add(*where, "malformed", f"{len(fields)} columns; a YOLO box line has 5 (class cx cy w h)")
        return None
    try:
        class_id = int(fields[0])
        cx, cy, w, h = (float(v) for v in fields[1:])
    except ValueError:
        report.add(*where, "malformed", "a YOLO line is an integer class and four numbers")
        return None
    if not 0 <= class_id < len(classes):
        report.add(
            *where,
            "unknown_class",
            f"class {class_id} is not one of the {len(classes)} classes (0..{len(classes) - 1})",
        )
        return None
    return Box(
        classes[class_id], (cx - w / 2) * width, (cy - h / 2) * height, (cx + w / 2) * width, (cy + h / 2) * height
    )
