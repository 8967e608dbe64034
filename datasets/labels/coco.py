"""COCO JSON boxes: `instances*.json` (under `annotations/` or the root) with `images`,
`annotations` (`bbox` = x, y, width, height in pixels; `iscrowd` 1 kept as an ignore region) and
`categories`. An image's `file_name` is looked for beside the JSON, under `images/`, under the
root, and last by its base name anywhere under the root. Several JSON files (train and val) are
read as one source.

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
    image_size,
    images_by_stem,
    read_text,
    relative_name,
)
from trainer.protocol import DETECTION, IGNORE_INDEX, SEGMENTATION


def coco_files(root: Path) -> list[Path]:
    """instances*.json under annotations/ or the root; else any single JSON there."""
    for folder in (root / "annotations", root):
        found = sorted(p for p in folder.glob("instances*.json") if p.is_file()) if folder.is_dir() else []
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
    by_stem = images_by_stem(root)
    by_relative = {str(p.relative_to(root)): p for p in by_stem.values()}
    by_basename: dict[str, Path] = {}
    for path in by_stem.values():
        by_basename.setdefault(path.name, path)
    found: list[AnnotatedImage] = []
    classes: dict[str, None] = {"background": None} if masks else {}
    for json_file in files:
        name = relative_name(json_file, root)
        data = _load(json_file, root, name)
        categories = {}
        for category in data.get("categories") or []:
            if (
                isinstance(category, dict)
                and isinstance(category.get("name"), str)
                and _id(category.get("id")) is not None
            ):
                categories[category["id"]] = category["name"].strip()
                classes.setdefault(category["name"].strip())
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


def _add_shape(image: AnnotatedImage, entry: dict, categories: dict, classes: list[str], where, report) -> None:
    """One annotation's polygons or RLE as a shape of the image (class index, kind, data)."""
    category = _id(entry.get("category_id"))
    if category not in categories:
        report.add(*where, "unknown_class", f"category_id {entry.get('category_id')!r} is not in categories")
        return
    index = IGNORE_INDEX if entry.get("iscrowd") else classes.index(categories[category])
    segmentation = entry.get("segmentation")
    if isinstance(segmentation, list):
        polygons = [p for p in segmentation if isinstance(p, list)]
        if not polygons or not all(_is_polygon(p) for p in polygons) or len(polygons) != len(segmentation):
            report.add(*where, "malformed", "a polygon is a list of at least 3 x, y pairs")
            return
        shape = (index, "polygons", tuple(tuple(float(v) for v in p) for p in polygons))
    elif isinstance(segmentation, dict):
        counts, size = segmentation.get("counts"), segmentation.get("size")
        if size != [image.height, image.width] or not isinstance(counts, list | str):
            report.add(*where, "malformed", f"RLE size must be [{image.height}, {image.width}] with its counts")
            return
        try:
            runs = rle_counts(counts) if isinstance(counts, str) else [int(v) for v in counts]
        except (TypeError, ValueError):
            runs = [-1]
        if any(r < 0 for r in runs) or sum(runs) != image.width * image.height:
            report.add(*where, "malformed", "RLE counts do not cover the image")
            return
        shape = (index, "rle", tuple(runs))
    else:
        report.add(*where, "malformed", "segmentation must be polygons or an RLE")
        return
    image.shapes += (shape,)
    if index != IGNORE_INDEX:
        image.present = image.present | {index}


def _is_polygon(points: list) -> bool:
    return len(points) >= 6 and len(points) % 2 == 0 and all(isinstance(v, int | float) for v in points)


def rle_counts(text: str) -> list[int]:
    """COCO's compressed RLE string -> run lengths (pycocotools' rleFrString, in Python)."""
    counts: list[int] = []
    position = 0
    while position < len(text):
        value = shift = 0
        more = True
        while more:
            if position >= len(text):
                raise ValueError("RLE string ends inside a number")
            char = ord(text[position]) - 48
            value |= (char & 0x1F) << shift
            more = bool(char & 0x20)
            position += 1
            shift += 5
            if not more and char & 0x10:
                value |= -1 << shift
        if len(counts) > 2:
            value += counts[-2]
        counts.append(value)
    return counts


def _load(json_file: Path, root: Path, name: str) -> dict:
    try:
        data = json.loads(read_text(json_file, root))
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
    if ".." not in Path(file_name).parts and not Path(file_name).is_absolute():
        for folder in (json_file.parent, json_file.parent.parent / "images", root / "images", root):
            candidate = folder / file_name
            if candidate.is_file():
                path = candidate
                break
    if path is None:
        path = by_relative.get(file_name) or by_basename.get(Path(file_name).name)
    if path is None:
        report.add(*where, "missing_image", f"no image {file_name!r} found")
        return None
    size = image_size(path)
    if size is None:
        report.add(relative_name(path, root), None, "bad_file", "not an image that can be opened")
        return None
    return AnnotatedImage(str(path), relative_name(path, root), *size)


def _box(entry: dict, categories: dict, where, report) -> Box | None:
    bbox = entry.get("bbox")
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(isinstance(v, int | float) for v in bbox):
        report.add(*where, "malformed", "bbox must be [x, y, width, height]")
        return None
    if _id(entry.get("category_id")) not in categories:
        report.add(*where, "unknown_class", f"category_id {entry.get('category_id')!r} is not in categories")
        return None
    x, y, w, h = (float(v) for v in bbox)
    return Box(categories[entry["category_id"]], x, y, x + w, y + h, ignore=bool(entry.get("iscrowd")))


def _id(value) -> int | str | None:
    """An id as COCO gives it (a number or text); anything else is no id (and never a dict key)."""
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None
