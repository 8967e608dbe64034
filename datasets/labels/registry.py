"""The label formats, one record each: its name, its task, how a person reads it, how it is
recognised in a listing of relative paths, and its reader (issue 32). No Django.

Everything that lists formats or branches on one reads this table: the wizard's and the API's
choices, the CLI's --format, the validators, the planner, the one detector (datasets.labels.detect,
for a server folder and an archive's member names alike). A new format is a record here and its
reader module; tests/datasets/labels/test_registry.py fails when a format's name is branched on
anywhere else.

The order is the order of detection: the first format whose layout a source matches is its format.
COCO comes first (a JSON names its images wherever they are), YOLO before KITTI (both have images/
and labels/; YOLO also has a class file), and the masks last.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from datasets.labels.coco import coco_name, read_coco
from datasets.labels.common import LabelSource
from datasets.labels.files import LabelError
from datasets.labels.kitti import IMAGE_FOLDERS, LABEL_FOLDERS, read_kitti
from datasets.labels.masks import LAYOUTS, read_masks
from datasets.labels.voc import ANNOTATION_FOLDER, read_voc
from datasets.labels.yolo import read_yolo, yolo_class_name
from trainer.protocol import DETECTION, SEGMENTATION


class Reader(Protocol):
    def __call__(self, root: Path, *, min_box_size: float) -> LabelSource: ...


@dataclass(frozen=True)
class Layout:
    """How a format is recognised in a listing of relative paths: each group of `folders` has one
    of its names as a folder; when `file_name` is given, a file it accepts lies directly in one of
    `file_folders` ("" the root); with `colour_masks`, the first PNG of the first folder is in
    colour (True) or not (False). Nothing else is looked at, so a rule costs a few listings."""

    folders: tuple[tuple[str, ...], ...] = ()
    file_folders: tuple[str, ...] = ()
    file_name: Callable[[str], bool] | None = None
    colour_masks: bool | None = None
    # The wanted file is one per image (VOC's XML), not one the format cannot do without (COCO's
    # JSON, YOLO's class file): a link among them is its reader's to report, not the source refused.
    per_image: bool = False

    def looked_at(self) -> tuple[str, ...]:
        """The names at the root this layout looks at (a link there refuses a server folder)."""
        return (*(name for group in self.folders for name in group), *(f for f in self.file_folders if f))


@dataclass(frozen=True)
class LabelFormat:
    name: str
    task: str
    label: str  # how the wizard names it
    read: Reader
    # None: never detected on its own; it reads the files of `same_files_as` for its own task.
    layout: Layout | None = None
    same_files_as: str | None = None
    # Where the format keeps its own split lists (train.txt, val.txt...), read by datasets.labels.splits.
    split_lists: str | None = None


def _masks(fmt: str) -> Reader:
    # Masks have no boxes, so no minimum box size; the reader tells its three layouts by name.
    def read(root: Path, *, min_box_size: float = 0) -> LabelSource:
        return read_masks(root, fmt)

    return read


def _coco_masks(root: Path, *, min_box_size: float = 0) -> LabelSource:
    return read_coco(root, min_box_size=min_box_size, masks=True)


def _one_each(names: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    return tuple((name,) for name in names)


LABEL_FORMATS: tuple[LabelFormat, ...] = (
    LabelFormat(
        "coco",
        DETECTION,
        "COCO JSON boxes (instances*.json)",
        read_coco,
        Layout(file_folders=("annotations", ""), file_name=coco_name),
    ),
    LabelFormat(
        "voc",
        DETECTION,
        "Pascal VOC XML (Annotations/)",
        read_voc,
        Layout(file_folders=(ANNOTATION_FOLDER,), file_name=lambda name: name.endswith(".xml"), per_image=True),
        split_lists="ImageSets/Main",
    ),
    LabelFormat(
        "voc_masks",
        SEGMENTATION,
        "VOC paletted masks (SegmentationClass/)",
        _masks("voc_masks"),
        Layout(folders=_one_each(LAYOUTS["voc_masks"])),
        split_lists="ImageSets/Segmentation",
    ),
    LabelFormat(
        "yolo",
        DETECTION,
        "YOLO txt (labels/ + classes.txt or data.yaml)",
        read_yolo,
        Layout(folders=(("images",), ("labels",)), file_folders=("", "labels"), file_name=yolo_class_name),
    ),
    LabelFormat(
        "kitti", DETECTION, "KITTI txt (images/ + labels/)", read_kitti, Layout(folders=(IMAGE_FOLDERS, LABEL_FOLDERS))
    ),
    LabelFormat(
        "rgb_masks",
        SEGMENTATION,
        "RGB masks + colour map (masks/)",
        _masks("rgb_masks"),
        Layout(folders=_one_each(LAYOUTS["rgb_masks"]), colour_masks=True),
    ),
    LabelFormat(
        "index_masks",
        SEGMENTATION,
        "Grey or paletted index masks (masks/)",
        _masks("index_masks"),
        Layout(folders=_one_each(LAYOUTS["index_masks"]), colour_masks=False),
    ),
    LabelFormat("coco_masks", SEGMENTATION, "COCO polygons and RLE (instances*.json)", _coco_masks, None, "coco"),
)
FORMATS = tuple(f.name for f in LABEL_FORMATS)
FORMAT_TASK = {f.name: f.task for f in LABEL_FORMATS}
# The tasks whose sources are label files in one of the formats (the others read class folders).
LABEL_TASKS = frozenset(FORMAT_TASK.values())
_BY_NAME = {f.name: f for f in LABEL_FORMATS}


def label_format(name: str) -> LabelFormat:
    """The format's record; LabelError naming the formats there are."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise LabelError(f"format {name!r} is not one of {', '.join(FORMATS)}") from None


def reads_label_files(task: str) -> bool:
    """Whether a source of `task` is label files in a format (else class folders or lists)."""
    return task in LABEL_TASKS


def format_for_task(name: str, task: str) -> str:
    """The format that reads the files `name` was detected in for `task`: COCO's instances*.json
    given as segmentation is read for its polygons and RLE (coco_masks), not its boxes. A format
    without such a sibling is itself (its task is checked by the caller, who names both)."""
    if FORMAT_TASK.get(name) == task:
        return name
    return next((f.name for f in LABEL_FORMATS if f.same_files_as == name and f.task == task), name)


def format_choices(*, task: str | None = None) -> list[tuple[str, str]]:
    """(name, label) of each format (of `task` when given), for a form's choices."""
    return [(f.name, f.label) for f in LABEL_FORMATS if task is None or f.task == task]
