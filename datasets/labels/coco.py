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
    checked_box,
    image_size,
    images_by_stem,
    read_text,
    relative_name,
)
from trainer.protocol import DETECTION


def coco_files(root: Path) -> list[Path]:
    """instances*.json under annotations/ or the root; else any single JSON there."""
    for folder in (root / "annotations", root):
        found = sorted(p for p in folder.glob("instances*.json") if p.is_file()) if folder.is_dir() else []
        if found:
            return found
    return []


def read_coco(root: Path, *, min_box_size: float = 0) -> LabelSource:
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
    classes: dict[str, None] = {}
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
            box = _box(entry, categories, where, report)
            if box is None:
                continue
            box = checked_box(report, where, box, image.width, image.height, min_box_size)
            if box is not None:
                image.boxes.append(box)
        for image_id, image in images.items():
            image.labelled = image_id in labelled
            found.append(image)
    return LabelSource(DETECTION, "coco", list(classes), found, report)


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
