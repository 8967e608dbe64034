"""Label readers for detection and segmentation sources: one module per format, one entry here.

`detect_format(root)` names the format a folder holds (or None: a classification folder);
`read_labels(root, fmt)` reads it into a LabelSource (images, classes, label report). No Django.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from datasets.labels.coco import coco_files, read_coco
from datasets.labels.common import LabelError, LabelSource
from datasets.labels.files import open_file
from datasets.labels.kitti import kitti_folders, read_kitti
from datasets.labels.masks import mask_folders, read_masks
from datasets.labels.voc import ANNOTATION_FOLDER, read_voc
from datasets.labels.yolo import read_yolo, yolo_class_file
from trainer.protocol import DETECTION, SEGMENTATION

# Each format and its task, most used first.
FORMAT_TASK = {
    "kitti": DETECTION,
    "voc": DETECTION,
    "coco": DETECTION,
    "yolo": DETECTION,
    "voc_masks": SEGMENTATION,
    "index_masks": SEGMENTATION,
    "rgb_masks": SEGMENTATION,
    "coco_masks": SEGMENTATION,
}
FORMATS = tuple(FORMAT_TASK)

__all__ = [
    "FORMATS",
    "FORMAT_TASK",
    "LabelError",
    "LabelSource",
    "detect_format",
    "detect_format_in_names",
    "detect_source_format",
    "read_labels",
]


def detect_format(root: Path) -> str | None:
    """The format of what `root` holds: a COCO instances*.json, VOC Annotations/*.xml, VOC
    SegmentationClass/, YOLO labels/ with classes.txt or data.yaml, a KITTI labels/ folder, or
    masks/ PNGs beside images/; None when it holds none of them."""
    if not root.is_dir():
        return None
    if coco_files(root):
        return "coco"
    if (root / ANNOTATION_FOLDER).is_dir() and any((root / ANNOTATION_FOLDER).glob("*.xml")):
        return "voc"
    if mask_folders(root, "voc_masks"):
        return "voc_masks"
    if (root / "images").is_dir() and (root / "labels").is_dir() and yolo_class_file(root):
        return "yolo"
    if kitti_folders(root):
        return "kitti"
    if mask_folders(root, "index_masks"):
        return "rgb_masks" if _holds_rgb_masks(root / "masks") else "index_masks"
    return None


def detect_source_format(root: Path) -> str | None:
    """detect_format, or the format of train/ when the source holds its splits as folders."""
    return detect_format(root) or detect_format(root / "train")


def detect_format_in_names(names: list[tuple[str, ...]]) -> str | None:
    """detect_format's rules on the parts of an archive's member names, looking through wrapper
    folders as the build does; no file is read, so masks/ beside images/ is `index_masks`."""
    parts = [p for p in names if p and not any(x.startswith(".") or x == "__MACOSX" for x in p)]
    for _ in range(4):
        if parts and len({p[0] for p in parts}) == 1 and all(len(p) > 1 for p in parts):
            parts = [p[1:] for p in parts]
    folders = {p[0] for p in parts if len(p) > 1}
    top_files = {p[0] for p in parts if len(p) == 1} | {p[1] for p in parts if len(p) == 2 and p[0] == "labels"}
    if any(
        p[-1].startswith("instances") and p[-1].endswith(".json") and p[:-1] in ((), ("annotations",)) for p in parts
    ):
        return "coco"
    if any(len(p) == 2 and p[0] == ANNOTATION_FOLDER and p[1].lower().endswith(".xml") for p in parts):
        return "voc"
    if {"SegmentationClass", "JPEGImages"} <= folders:
        return "voc_masks"
    if {"images", "labels"} <= folders and top_files & {"classes.txt", "data.yaml", "data.yml"}:
        return "yolo"
    if folders & {"images", "image_2"} and folders & {"labels", "label_2"}:
        return "kitti"
    if {"masks", "images"} <= folders:
        return "index_masks"
    if "train" in folders:  # DIGITS's train/ (val/, test/) folders, each in one format
        return detect_format_in_names([p[1:] for p in parts if p[0] == "train" and len(p) > 2])
    return None


def _holds_rgb_masks(folder: Path) -> bool:
    first = next((p for p in sorted(folder.rglob("*.png")) if p.is_file()), None)
    if first is None:
        return False
    try:
        with open_file(first) as handle, Image.open(handle) as image:
            return image.mode in ("RGB", "RGBA")
    except (OSError, LabelError):  # a link is not looked into (datasets.labels.files)
        return False


def read_labels(root: Path, fmt: str, *, min_box_size: float = 0) -> LabelSource:
    """Read `root` as `fmt`; LabelError when it cannot be read as that format at all.

    `root` must be resolved (datasets.labels.plan.read_source does it once for a source and its
    split folders): every file is opened from "/" without following a link, so a link above an
    unresolved root would refuse every file, and a root resolved here would follow a linked split."""
    if fmt not in FORMAT_TASK:
        raise LabelError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    if fmt in ("voc_masks", "index_masks", "rgb_masks"):
        return read_masks(root, fmt)
    if fmt == "coco_masks":
        return read_coco(root, masks=True)
    reader = {"kitti": read_kitti, "voc": read_voc, "coco": read_coco, "yolo": read_yolo}[fmt]
    return reader(root, min_box_size=min_box_size)
