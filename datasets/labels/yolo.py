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
    checked_class_names,
    coordinate,
    images_by_stem,
    labelled_text_files,
    name_lines,
    read_text,
    relative_name,
    with_unlabelled,
)
from trainer.protocol import DETECTION
from workbench.core.numbers import MAX_ID, NumberError, bounded_number

# What YOLO names its classes in, at the root or in labels/.
CLASS_FILES = ("classes.txt", "data.yaml", "data.yml")
# The four numbers of a box line, as messages name them.
BOX_FIELDS = ("x_center", "y_center", "width", "height")


class _Refused(yaml.YAMLError):
    pass


class _PlainLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors, aliases and tags while composing, before a node is built.

    Why: aliases make a document of a few hundred bytes stand for gigabytes once expanded (393
    bytes gave a 936 MB answer through the names); a YOLO data.yaml has no use for them, nor for
    tags (!!python/..., !!binary). Refused at the event, so nothing is ever expanded.
    """

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(f"line {event.start_mark.line + 1}: aliases (*{event.anchor}) are not allowed")
        if getattr(event, "anchor", None) is not None:
            raise _Refused(f"line {event.start_mark.line + 1}: anchors (&{event.anchor}) are not allowed")
        if getattr(event, "tag", None) is not None:
            raise _Refused(f"line {event.start_mark.line + 1}: tags ({event.tag}) are not allowed")
        return super().compose_node(parent, index)


def yolo_class_name(name: str) -> bool:
    """Whether a file so named holds YOLO's class names (the registry recognises YOLO by it)."""
    return name in CLASS_FILES


def yolo_class_file(root: Path) -> Path | None:
    for folder in (root, root / "labels"):
        for name in CLASS_FILES:
            if (folder / name).is_file():
                return folder / name
    return None


def read_yolo_classes(path: Path, root: Path) -> list[str]:
    name = relative_name(path, root)
    if path.suffix == ".txt":
        names = name_lines(read_text(path, root, "class_list"))
    else:
        names = _yaml_names(read_text(path, root, "data_yaml"), name)
    if not names:
        raise LabelError(f"{name}: no class names")
    return checked_class_names(names, name)


def _yaml_names(text: str, name: str) -> list:
    """data.yaml's `names` (a list, or a mapping of the ids 0, 1, 2...), each name text (a number
    is read as its digits: YOLO sets of digits write `names: [0, 1, 2]`)."""
    try:
        data = yaml.load(text, Loader=_PlainLoader)  # noqa: S506 -- a SafeLoader that also refuses aliases
    except _Refused as exc:
        raise LabelError(f"{name}: {exc}") from None
    except yaml.YAMLError as exc:
        raise LabelError(f"{name}: not valid YAML ({str(exc).splitlines()[0]})") from None
    except RecursionError:
        raise LabelError(f"{name}: nested too deeply to be a data.yaml") from None
    except ValueError as exc:  # a value the loader cannot build: int() of 5,000 digits, 2001-13-45
        raise LabelError(f"{name}: a value cannot be read ({str(exc)[:80]})") from None
    names = data.get("names") if isinstance(data, dict) else None
    if isinstance(names, dict):
        if not all(type(k) is int for k in names) or sorted(names) != list(range(len(names))):
            raise LabelError(f"{name}: names must map the ids 0, 1, 2... to class names")
        names = [names[i] for i in range(len(names))]
    if not isinstance(names, list):
        raise LabelError(f"{name}: no list of names")
    return [str(n).strip() if type(n) is int else n.strip() if isinstance(n, str) else n for n in names]


def read_yolo(root: Path, *, min_box_size: float = 0) -> LabelSource:
    class_file = yolo_class_file(root)
    if class_file is None or not (root / "images").is_dir() or not (root / "labels").is_dir():
        raise LabelError("YOLO needs images/ and labels/ folders and classes.txt or data.yaml")
    classes = read_yolo_classes(class_file, root)
    report = LabelReport()
    images = images_by_stem(root / "images", root, report)

    def parse_line(line: str, where: tuple[str, int], image: AnnotatedImage, report: LabelReport) -> Box | None:
        return _parse_line(line, where, classes, image.width, image.height, report)

    labelled = labelled_text_files(
        root,
        (root / "images", root / "labels"),
        images,
        report,
        kind="yolo_txt",
        parse_line=parse_line,
        min_box_size=min_box_size,
        skip=("classes.txt",),
    )
    return LabelSource(DETECTION, "yolo", classes, with_unlabelled(root, images, labelled, report), report)


def _parse_line(line, where, classes: list[str], width: int, height: int, report: LabelReport) -> Box | None:
    fields = line.split()
    if not fields:
        return None
    if len(fields) != 5:
        report.add(*where, "malformed", f"{len(fields)} columns; a YOLO box line has 5 (class cx cy w h)")
        return None
    try:
        class_id = bounded_number(fields[0], field="class", low=-MAX_ID, high=MAX_ID, integer=True)
        cx, cy, w, h = (coordinate(v, f) for v, f in zip(fields[1:], BOX_FIELDS, strict=True))
    except NumberError as error:
        report.add(*where, "malformed", f"{error} (a YOLO line is an integer class and four numbers)")
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
