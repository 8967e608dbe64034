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
    checked_box,
    files_under,
    image_size,
    images_by_stem,
    read_text,
    relative_name,
)
from trainer.protocol import DETECTION

IMAGE_FOLDERS = ("images", "image_2")
LABEL_FOLDERS = ("labels", "label_2")
DONT_CARE = "dontcare"


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
    images = images_by_stem(image_folder)
    labelled: dict[str, AnnotatedImage] = {}
    classes: set[str] = set()
    for label_file in files_under(label_folder, ".txt"):
        stem = str(label_file.relative_to(label_folder).with_suffix(""))
        name = relative_name(label_file, root)
        image_path = images.get(stem)
        if image_path is None:
            report.add(name, None, "missing_image", f"no image {stem}.* in {image_folder.name}/")
            continue
        size = image_size(image_path)
        if size is None:
            report.add(relative_name(image_path, root), None, "bad_file", "not an image that can be opened")
            continue
        image = AnnotatedImage(str(image_path), relative_name(image_path, root), *size)
        try:
            text = read_text(label_file, root)
        except LabelError as exc:
            report.add(name, None, "bad_file", str(exc))
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            box = _parse_line(line, (name, number), report)
            if box is None:
                continue
            box = checked_box(report, (name, number), box, image.width, image.height, min_box_size)
            if box is not None:
                image.boxes.append(box)
                if box.class_name is not None:
                    classes.add(box.class_name)
        labelled[stem] = image
    found = []
    for stem, path in images.items():
        if stem in labelled:
            found.append(labelled[stem])
            continue
        size = image_size(path)
        if size is None:
            report.add(relative_name(path, root), None, "bad_file", "not an image that can be opened")
            continue
        found.append(AnnotatedImage(str(path), relative_name(path, root), *size, labelled=False))
    return LabelSource(DETECTION, "kitti", sorted(classes), found, report)


def _parse_line(line: str, where: tuple[str, int], report: LabelReport) -> Box | None:
    fields = line.split()
    if not fields:
        return None
    if len(fields) not in (15, 16):
        report.add(*where, "malformed", f"{len(fields)} columns; a KITTI line has 15 (16 with a score)")
        return None
    try:
        left, top, right, bottom = (float(v) for v in fields[4:8])
    except ValueError:
        report.add(*where, "malformed", "columns 5 to 8 (left top right bottom) must be numbers")
        return None
    if fields[0].lower() == DONT_CARE:
        return Box(None, left, top, right, bottom, ignore=True)
    return Box(fields[0], left, top, right, bottom)
