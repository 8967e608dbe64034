"""Pascal VOC XML boxes: `Annotations/*.xml` beside `JPEGImages/`. Each `<object>` has a `<name>`,
a `<bndbox>` of 1-based inclusive pixels (xmin 1 is the first column, so x1 = xmin - 1, x2 = xmax)
and an optional `<difficult>1</difficult>`, kept as an ignore region. The image is
`JPEGImages/<filename>`, else the image of the XML's own name.

Problems are named by file and object number: "object 3".

The XML is parsed incrementally by expat, no tree built: only an object's name, box and difficult
flag are kept, and each file is held to its byte limit (datasets.labels.limits) while it streams.
A DOCTYPE (and so any entity declaration) is refused at its first event: a VOC file has no use for
one, and entities are how a small file expands into a large one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from xml.parsers import expat

from datasets.labels.common import (
    AnnotatedImage,
    Box,
    LabelError,
    LabelReport,
    LabelSource,
    checked_box,
    class_name_refused,
    coordinate,
    files_under,
    image_size,
    images_by_stem,
    relative_name,
)
from datasets.labels.files import joined, open_limited
from trainer.protocol import DETECTION
from workbench.core.numbers import NumberError

IMAGE_FOLDER = "JPEGImages"
ANNOTATION_FOLDER = "Annotations"
BOX_TAGS = ("xmin", "ymin", "xmax", "ymax")
# A VOC file nests 4 deep (annotation/object/bndbox/xmin, parts one more); far deeper is no VOC file.
MAX_DEPTH = 32


class _Refused(ValueError):
    """What a VOC file may not hold (a DOCTYPE, entities, absurd nesting); the message says which."""


@dataclass
class _Parsed:
    """What is kept of one XML file: the first <filename> under the root, and per <object> the
    text of its first <name>, <difficult> and <bndbox>'s first coordinates (as findtext gives)."""

    filename: str | None = None
    objects: list[dict[str, str]] = field(default_factory=list)


def read_voc(root: Path, *, min_box_size: float = 0) -> LabelSource:
    annotation_folder = root / ANNOTATION_FOLDER
    if not annotation_folder.is_dir():
        raise LabelError("Pascal VOC needs an Annotations/ folder of XML files")
    image_folder = root / IMAGE_FOLDER
    report = LabelReport()
    images = images_by_stem(image_folder, root, report)
    found: list[AnnotatedImage] = []
    classes: set[str] = set()
    used: set[Path | None] = set()  # images read with their file, or left out with a refused one
    for xml_file in files_under(annotation_folder, ".xml", root, report):
        name = relative_name(xml_file, root)
        try:
            parsed = _parse_file(xml_file, root)
        except LabelError as exc:
            report.add(name, None, "bad_file", str(exc))
            used.add(images.get(str(xml_file.relative_to(annotation_folder).with_suffix(""))))  # left out
            continue
        except expat.ExpatError as exc:
            report.add(name, exc.lineno, "malformed", f"not well-formed XML ({expat.ErrorString(exc.code)})")
            continue
        except _Refused as exc:
            report.add(name, None, "malformed", str(exc))
            continue
        image_path = _image_for(parsed.filename, xml_file, annotation_folder, image_folder, images, root)
        if image_path is None:
            shown = parsed.filename or xml_file.stem
            report.add(name, None, "missing_image", f"no image {shown!r} in {IMAGE_FOLDER}/")
            continue
        used.add(image_path)  # read with its file, or named as unreadable: never named twice
        size = image_size(image_path, root, report)
        if size is None:
            continue
        image = AnnotatedImage(str(image_path), relative_name(image_path, root), *size)
        for number, obj in enumerate(parsed.objects, start=1):
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
    filename: str | None, xml_file: Path, annotation_folder: Path, image_folder: Path, images: dict, root: Path
) -> Path | None:
    candidate = joined(image_folder, (filename or "").strip(), root)
    if candidate is not None and candidate.is_file():
        return candidate
    return images.get(str(xml_file.relative_to(annotation_folder).with_suffix("")))


def _parse_file(xml_file: Path, root: Path) -> _Parsed:
    """The kept parts of one VOC file, streamed within its byte limit; LabelError (too large, not
    readable), expat.ExpatError (not well-formed) or _Refused (a DOCTYPE, entities, deep nesting)."""
    parsed, path, texts = _Parsed(), [], []
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)

    def refuse_doctype(*_args) -> None:
        raise _Refused("a DOCTYPE (DTD) is not allowed in a VOC annotation")

    def refuse_entity(*_args) -> None:
        raise _Refused("entity declarations are not allowed in a VOC annotation")

    def start(tag: str, _attributes) -> None:
        if len(path) >= MAX_DEPTH:
            raise _Refused(f"line {parser.CurrentLineNumber}: elements nested deeper than {MAX_DEPTH}")
        path.append(tag)
        texts.append([])
        if path[-1] == "object":
            parsed.objects.append({})

    def end(_tag: str) -> None:
        text = "".join(texts.pop())
        kept = _kept_as(path)
        path.pop()
        if kept == "filename" and parsed.filename is None:
            parsed.filename = text
        elif kept is not None and kept not in parsed.objects[-1]:  # the first, as findtext reads it
            parsed.objects[-1][kept] = text

    def data(text: str) -> None:
        if _kept_as(path) is not None:
            texts[-1].append(text)

    parser.StartDoctypeDeclHandler = refuse_doctype
    parser.EntityDeclHandler = refuse_entity
    parser.StartElementHandler, parser.EndElementHandler, parser.CharacterDataHandler = start, end, data
    with open_limited(xml_file, root, "voc_xml") as stream:
        parser.ParseFile(stream)
    return parsed


def _kept_as(path: list[str]) -> str | None:
    """The key an element's text is kept under: "filename" (a child of the root), an object's
    "name" or "difficult", or a coordinate of its "bndbox"; None for anything else."""
    if len(path) == 2 and path[1] == "filename":
        return "filename"
    if len(path) >= 2 and path[-2] == "object" and path[-1] in ("name", "difficult"):
        return path[-1]
    if len(path) >= 3 and path[-3:-1] == ["object", "bndbox"] and path[-1] in BOX_TAGS:
        return path[-1]
    if len(path) >= 2 and path[-2] == "object" and path[-1] == "bndbox":
        return "bndbox"
    return None


def _parse_object(obj: dict[str, str], where: tuple[str, None], report: LabelReport) -> Box | None:
    class_name = (obj.get("name") or "").strip()
    if not class_name:
        report.add(*where, "malformed", "no <name>")
        return None
    if class_name_refused(report, where, class_name):
        return None
    if "bndbox" not in obj:
        report.add(*where, "malformed", "no <bndbox>")
        return None
    try:
        xmin, ymin, xmax, ymax = (coordinate(obj.get(tag, ""), tag) for tag in BOX_TAGS)
    except NumberError as error:
        report.add(*where, "malformed", f"<bndbox>: {error}")
        return None
    difficult = (obj.get("difficult") or "0").strip() in ("1", "true")
    return Box(class_name, xmin - 1, ymin - 1, xmax, ymax, ignore=difficult)
