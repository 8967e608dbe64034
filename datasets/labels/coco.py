"""COCO JSON boxes: `instances*.json` (under `annotations/` or the root) with `images`,
`annotations` (`bbox` = x, y, width, height in pixels; `iscrowd` 1 kept as an ignore region) and
`categories`. An image's `file_name` is looked for beside the JSON, under `images/` beside the
JSON's folder or at the root, under the root, and last by its base name anywhere under the root:
never outside the source (a JSON at the root once had its images looked for in the root's
parent). Several JSON files (train and val) are read as one source.

Problems are named by file and entry: "annotations/instances.json annotation 7".
"""

from __future__ import annotations

import json
from pathlib import Path

from datasets.labels.common import (
    AnnotatedImage,
    Box,
    LabelError,
    LabelReport,
    LabelSource,
    MaskFormat,
    checked_box,
    class_name_refused,
    coordinate,
    image_size,
    images_by_stem,
    read_text,
    relative_name,
)
from datasets.labels.files import joined
from datasets.names import shown_name
from trainer.protocol import DETECTION, IGNORE_INDEX, SEGMENTATION
from workbench.core.numbers import NumberError, bounded_number

# Characters one RLE count may take: 7 x 5 bits hold 2^35, more than the pixels of any image that
# may be decoded (datasets.images). pycocotools reads them into a 64-bit integer.
MAX_RLE_CHARS = 7


def coco_name(name: str) -> bool:
    """Whether a file so named is a COCO file (the registry recognises COCO by it)."""
    return name.startswith("instances") and name.endswith(".json")


def coco_files(root: Path) -> list[Path]:
    """instances*.json under annotations/ or the root."""
    for folder in (root / "annotations", root):
        found = sorted(p for p in folder.glob("*.json") if coco_name(p.name) and p.is_file()) if folder.is_dir() else []
        if found:
            return found
    return []


def read_coco(root: Path, *, min_box_size: float = 0, masks: bool = False) -> LabelSource:
    """COCO boxes; with `masks`, COCO's polygons and RLE as segmentation (`coco_masks`): class 0
    is the background, then the categories; an `iscrowd` region is ignore (255)."""
    files = coco_files(root)
    if not files:
        raise LabelError("COCO needs an instances*.json file (in annotations/ or at the top)")
    report = LabelReport()
    by_stem = images_by_stem(root, root, report)
    by_relative = {str(p.relative_to(root)): p for p in by_stem.values()}
    by_basename: dict[str, Path] = {}
    for path in by_stem.values():
        by_basename.setdefault(path.name, path)
    found: list[AnnotatedImage] = []
    classes: dict[str, None] = {"background": None} if masks else {}
    for json_file in files:
        name = relative_name(json_file, root)
        data = _load(json_file, root, name)
        categories = _categories(data, name, report)
        for category in categories.values():
            classes.setdefault(category)
        images = {}
        listed = {_id(entry.get("id")) for entry in data["images"] if isinstance(entry, dict)}
        for number, entry in enumerate(data["images"], start=1):
            image = _image(entry, (f"{name} image {number}", None), json_file, root, report, by_relative, by_basename)
            if image is not None:
                images[entry["id"]] = image
        labelled = set()
        for number, entry in enumerate(data.get("annotations") or [], start=1):
            where = (f"{name} annotation {number}", None)
            image_id = _id(entry.get("image_id")) if isinstance(entry, dict) else None
            if image_id is None or image_id not in images:
                if image_id is not None and image_id in listed:
                    continue  # its image is missing or unusable: said once, under the image
                report.add(*where, "malformed", "an annotation needs an image_id of a listed image and a bbox")
                continue
            image = images[image_id]
            labelled.add(image_id)
            if masks:
                _add_shape(image, entry, categories, list(classes), where, report)
                continue
            box = _box(entry, categories, where, report)
            if box is None:
                continue
            box = checked_box(report, where, box, image.width, image.height, min_box_size)
            if box is not None:
                image.boxes.append(box)
        for image_id, image in images.items():
            image.labelled = image_id in labelled
            if masks:
                image.present = image.present | {0}  # what no shape covers is background
            found.append(image)
    if masks:
        return LabelSource(SEGMENTATION, "coco_masks", list(classes), found, report, mask_format=MaskFormat("shapes"))
    return LabelSource(DETECTION, "coco", list(classes), found, report)


def _categories(data: dict, name: str, report: LabelReport) -> dict:
    """{id: class name} of the categories with an id and a name that passes the class-name rule
    (datasets.names); a refused name is reported, and its annotations become unknown classes."""
    categories = {}
    for number, category in enumerate(data.get("categories") or [], start=1):
        if (
            isinstance(category, dict)
            and isinstance(category.get("name"), str)
            and _id(category.get("id")) is not None
            and not class_name_refused(report, (f"{name} category {number}", None), category["name"])
        ):
            categories[category["id"]] = category["name"].strip()
    return categories


def _add_shape(image: AnnotatedImage, entry: dict, categories: dict, classes: list[str], where, report) -> None:
    """One annotation's polygons or RLE as a shape of the image (class index, kind, data)."""
    category = _id(entry.get("category_id"))
    if category not in categories:
        report.add(*where, "unknown_class", f"category_id {_shown_id(entry.get('category_id'))} is not in categories")
        return
    index = IGNORE_INDEX if entry.get("iscrowd") else classes.index(categories[category])
    segmentation = entry.get("segmentation")
    try:
        shape = (index, *_segmentation(segmentation, image))
    except NumberError as error:
        report.add(*where, "malformed", f"segmentation: {error}")
        return
    except ValueError as error:
        report.add(*where, "malformed", str(error))
        return
    # A list, appended to: a tuple grown by += copied itself per annotation (quadratic in them).
    image.shapes = image.shapes if isinstance(image.shapes, list) else list(image.shapes)
    image.shapes.append(shape)
    if index != IGNORE_INDEX:
        image.present = image.present | {index}


def _segmentation(segmentation, image: AnnotatedImage) -> tuple[str, tuple]:
    """("polygons", points) or ("rle", run lengths); ValueError (NumberError naming the value)
    for anything else, or numbers that are not finite or lie far outside the image."""
    if isinstance(segmentation, list):
        if not segmentation or not all(isinstance(p, list) and len(p) >= 6 and len(p) % 2 == 0 for p in segmentation):
            raise ValueError("a polygon is a list of at least 3 x, y pairs")
        return "polygons", tuple(tuple(coordinate(v, "polygon point") for v in p) for p in segmentation)
    if not isinstance(segmentation, dict):
        raise ValueError("segmentation must be polygons or an RLE")
    counts, size, area = segmentation.get("counts"), segmentation.get("size"), image.width * image.height
    if size != [image.height, image.width] or not isinstance(counts, list | str):
        raise ValueError(f"RLE size must be [{image.height}, {image.width}] with its counts")
    if isinstance(counts, str):
        runs = rle_counts(counts, area)
    elif len(counts) > area + 1:
        raise ValueError(f"RLE has {len(counts)} counts, more than the {area + 1} its image can have")
    else:
        runs = [bounded_number(v, field="RLE counts", low=0, high=area, integer=True) for v in counts]
    if sum(runs) != area:
        raise ValueError("RLE counts do not cover the image")
    return "rle", tuple(runs)


def rle_counts(text: str, area: int) -> list[int]:
    """COCO's compressed RLE string -> run lengths (pycocotools' rleFrString, in Python), in time
    linear in the text: a number has at most MAX_RLE_CHARS characters (an endless one shifted a
    growing integer per character: quadratic, 26 s for 1 MB), the text at most that per count an
    image of `area` pixels can have, and each run at most `area`. ValueError otherwise."""
    if len(text) > MAX_RLE_CHARS * (area + 1):
        raise ValueError(f"RLE counts string of {len(text)} characters is too long for a {area}-pixel image")
    counts: list[int] = []
    position = total = 0
    while position < len(text):
        value, position = _rle_number(text, position)
        if len(counts) > 2:
            value += counts[-2]
        total += value
        if not 0 <= value <= area or total > area:
            raise ValueError("RLE counts do not cover the image")
        counts.append(value)
    return counts


def _rle_number(text: str, position: int) -> tuple[int, int]:
    """One LEB128-like number of 5-bit characters from `position`: (value, next position)."""
    value = shift = 0
    for at in range(position, min(position + MAX_RLE_CHARS, len(text))):
        char = ord(text[at]) - 48
        value |= (char & 0x1F) << shift
        shift += 5
        if not char & 0x20:
            if char & 0x10:
                value |= -1 << shift
            return value, at + 1
    raise ValueError("RLE counts string has a number that does not end")


def _load(json_file: Path, root: Path, name: str) -> dict:
    try:
        data = json.loads(read_text(json_file, root, "coco_json"))
    except json.JSONDecodeError as exc:
        raise LabelError(f"{name} line {exc.lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise LabelError(f"{name}: nested too deeply to be a COCO file") from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise LabelError(f"{name}: not a COCO file (no list of images)")
    if not isinstance(data.get("annotations", []), list) or not isinstance(data.get("categories", []), list):
        raise LabelError(f"{name}: annotations and categories must be lists")
    return data


def _image(entry, where, json_file: Path, root: Path, report, by_relative, by_basename) -> AnnotatedImage | None:
    if not isinstance(entry, dict) or _id(entry.get("id")) is None or not isinstance(entry.get("file_name"), str):
        report.add(*where, "malformed", "an image needs an id and a file_name")
        return None
    file_name = entry["file_name"]
    path = None
    for folder in (json_file.parent, json_file.parent.parent / "images", root / "images", root):
        candidate = joined(folder, file_name, root)
        if candidate is not None and candidate.is_file():
            path = candidate
            break
    if path is None:
        path = by_relative.get(file_name) or by_basename.get(Path(file_name).name)
    if path is None:
        report.add(*where, "missing_image", f"no image '{shown_name(file_name, 120)}' found")
        return None
    size = image_size(path, root, report)
    if size is None:
        return None
    return AnnotatedImage(str(path), relative_name(path, root), *size)


def _box(entry: dict, categories: dict, where, report) -> Box | None:
    bbox = entry.get("bbox")
    if not isinstance(bbox, list) or len(bbox) != 4:
        report.add(*where, "malformed", "bbox must be [x, y, width, height]")
        return None
    try:
        x, y, w, h = (coordinate(v, f"bbox[{i}]") for i, v in enumerate(bbox))
    except NumberError as error:
        report.add(*where, "malformed", str(error))
        return None
    if _id(entry.get("category_id")) not in categories:
        report.add(*where, "unknown_class", f"category_id {_shown_id(entry.get('category_id'))} is not in categories")
        return None
    return Box(categories[entry["category_id"]], x, y, x + w, y + h, ignore=bool(entry.get("iscrowd")))


def _id(value) -> int | str | None:
    """An id as COCO gives it (a number or text); anything else is no id (and never a dict key)."""
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


def _shown_id(value: object) -> str:
    """An id from the file as a report shows it: a number as it is, anything else cut (a file can
    give a string of megabytes or a list where the id belongs)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**15:
        return str(value)
    return repr(shown_name(value)) if isinstance(value, str) else f"(a {type(value).__name__})"
