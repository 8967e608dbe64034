"""KITTI object labels as DIGITS read them: `images/` + `labels/` (or KITTI's own `image_2/` +
`label_2/`), one `.txt` per image with the same relative name, whatever the name (not only
numbers). Each line has 15 columns (16 with a score):

    type truncated occluded alpha left top right bottom height width length x y z rotation_y [score]

`left top right bottom` are the box in pixels (0-based, continuous). `DontCare` lines are regions
without a class, kept as ignore regions. An image without a label file has no objects.
"""

from __future__ import annotations

from pathlib import Path

from datasets.labels.common import (
    AnnotatedImage,
    Box,
    LabelError,
    LabelReport,
    LabelSource,
    class_name_refused,
    coordinate,
    images_by_stem,
    labelled_text_files,
    with_unlabelled,
)
from trainer.protocol import DETECTION
from workbench.core.numbers import NumberError

IMAGE_FOLDERS = ("images", "image_2")
LABEL_FOLDERS = ("labels", "label_2")
DONT_CARE = "dontcare"
BOX_COLUMNS = ("left", "top", "right", "bottom")  # columns 5 to 8, as messages name them


def kitti_folders(root: Path) -> tuple[Path, Path] | None:
    images = next((root / n for n in IMAGE_FOLDERS if (root / n).is_dir()), None)
    labels = next((root / n for n in LABEL_FOLDERS if (root / n).is_dir()), None)
    return (images, labels) if images and labels else None


def read_kitti(root: Path, *, min_box_size: float = 0) -> LabelSource:
    folders = kitti_folders(root)
    if folders is None:
        raise LabelError("KITTI needs an images/ and a labels/ folder side by side")
    image_folder, label_folder = folders
    report = LabelReport()
    images = images_by_stem(image_folder, root, report)
    labelled = labelled_text_files(
        root,
        folders,
        images,
        report,
        kind="kitti_txt",
        parse_line=_parse_line,
        min_box_size=min_box_size,
    )
    classes = {box.class_name for image in labelled.values() if image for box in image.boxes if box.class_name}
    found = with_unlabelled(root, images, labelled, report)
    return LabelSource(DETECTION, "kitti", sorted(classes), found, report)


def _parse_line(line: str, where: tuple[str, int], image: AnnotatedImage, report: LabelReport) -> Box | None:
    fields = line.split()
    if not fields:
        return None
    if len(fields) not in (15, 16):
        report.add(*where, "malformed", f"{len(fields)} columns; a KITTI line has 15 (16 with a score)")
        return None
    try:
        left, top, right, bottom = (coordinate(v, f) for v, f in zip(fields[4:8], BOX_COLUMNS, strict=True))
    except NumberError as error:
        report.add(*where, "malformed", str(error))
        return None
    if fields[0].lower() == DONT_CARE:
        return Box(None, left, top, right, bottom, ignore=True)
    if class_name_refused(report, where, fields[0]):
        return None
    return Box(fields[0], left, top, right, bottom)
