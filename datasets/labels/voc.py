"""Pascal VOC XML boxes: `Annotations/*.xml` beside `JPEGImages/`. Each `<object>` has a `<name>`,
a `<bndbox>` of 1-based inclusive pixels (xmin 1 is the first column, so x1 = xmin - 1, x2 = xmax)
and an optional `<difficult>1</difficult>`, kept as an ignore region. The image is
`JPEGImages/<filename>`, else the image of the XML's own name.

Problems are named by file and object number (ElementTree gives no line numbers): "object 3".
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from datasets.labels.common import (
    AnnotatedImage,
    Box,
    LabelError,
    LabelReport,
    LabelSource,
    checked_box,
    class_name_refused,
    files_under,
    image_size,
    images_by_stem,
    read_text,
    relative_name,
)
from datasets.labels.files import joined
from trainer.protocol import DETECTION

IMAGE_FOLDER = "JPEGImages"
ANNOTATION_FOLDER = "Annotations"


def read_voc(root: Path, *, min_box_size: float = 0) -> LabelSource:
    annotation_folder = root / ANNOTATION_FOLDER
    if not annotation_folder.is_dir():
        raise LabelError("Pascal VOC needs an Annotations/ folder of XML files")
    image_folder = root / IMAGE_FOLDER
    report = LabelReport()
    images = images_by_stem(image_folder, root, report)
    found: list[AnnotatedImage] = []
    classes: set[str] = set()
    used: set[Path] = set()
    for xml_file in files_under(annotation_folder, ".xml", root, report):
        name = relative_name(xml_file, root)
        try:
            tree = ET.fromstring(read_text(xml_file, root))
        except LabelError as exc:
            report.add(name, None, "bad_file", str(exc))
            continue
        except ET.ParseError as exc:
            report.add(name, exc.position[0], "malformed", f"not well-formed XML ({exc})")
            continue
        image_path = _image_for(tree, xml_file, annotation_folder, image_folder, images, root)
        if image_path is None:
            report.add(
                name,
                None,
                "missing_image",
                f"no image {(tree.findtext('filename') or xml_file.stem)!r} in {IMAGE_FOLDER}/",
            )
            continue
        size = image_size(image_path, root, report)
        if size is None:
            continue
        used.add(image_path)
        image = AnnotatedImage(str(image_path), relative_name(image_path, root), *size)
        for number, obj in enumerate(tree.iter("object"), start=1):
            where = (f"{name} object {number}", None)
            box = _parse_object(obj, where, report)
            if box is None:
                continue
            box = checked_box(report, where, box, image.width, image.height, min_box_size)
            if box is not None:
                image.boxes.append(box)
                classes.add(box.class_name)
        found.append(image)
    for path in images.values():
        if path in used:
            continue
        size = image_size(path, root, report)
        if size is not None:
            found.append(AnnotatedImage(str(path), relative_name(path, root), *size, labelled=False))
    return LabelSource(DETECTION, "voc", sorted(classes), found, report)


def _image_for(
    tree, xml_file: Path, annotation_folder: Path, image_folder: Path, images: dict, root: Path
) -> Path | None:
    candidate = joined(image_folder, (tree.findtext("filename") or "").strip(), root)
    if candidate is not None and candidate.is_file():
        return candidate
    return images.get(str(xml_file.relative_to(annotation_folder).with_suffix("")))


def _parse_object(obj, where: tuple[str, None], report: LabelReport) -> Box | None:
    class_name = (obj.findtext("name") or "").strip()
    if not class_name:
        report.add(*where, "malformed", "no <name>")
        return None
    if class_name_refused(report, where, class_name):
        return None
    box = obj.find("bndbox")
    if box is None:
        report.add(*where, "malformed", "no <bndbox>")
        return None
    try:
        xmin, ymin, xmax, ymax = (float(box.findtext(tag) or "") for tag in ("xmin", "ymin", "xmax", "ymax"))
    except ValueError:
        report.add(*where, "malformed", "<bndbox> needs numbers in xmin, ymin, xmax and ymax")
        return None
    difficult = (obj.findtext("difficult") or "0").strip() in ("1", "true")
    return Box(class_name, xmin - 1, ymin - 1, xmax, ymax, ignore=difficult)
