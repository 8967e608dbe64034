"""Label readers for detection and segmentation sources: one module per format, one entry here.

`detect_format(root)` names the format a folder holds (or None: a classification folder);
`read_labels(root, fmt)` reads it into a LabelSource (images, classes, label report). No Django.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from PIL import Image

from datasets.labels.coco import read_coco
from datasets.labels.common import LabelError, LabelSource
from datasets.labels.files import LinkRefused, list_files, open_file
from datasets.labels.kitti import IMAGE_FOLDERS, LABEL_FOLDERS, read_kitti
from datasets.labels.masks import LAYOUTS, read_masks
from datasets.labels.voc import ANNOTATION_FOLDER, read_voc
from datasets.labels.yolo import read_yolo
from datasets.names import LINK_NOT_FOLLOWED
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
# What YOLO names its classes in, at the root or in labels/ (datasets.labels.yolo.yolo_class_file).
YOLO_CLASS_FILES = ("classes.txt", "data.yaml", "data.yml")

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
    masks/ PNGs beside images/; None when it holds none of them.

    Nothing is looked at through a link (lstat, never stat; a folder listed only when it is one):
    a linked Annotations/ is not looked into. When no format is found and a link stood where one
    of them looks, LinkRefused names that link, so the user hears why, not "no labels found"."""
    if os.path.islink(root):  # a split folder (train/) made a link: named, not looked into
        raise LinkRefused(f"{root.name}: {LINK_NOT_FOLLOWED}")
    look = _Look(root)
    fmt = _detected(look)
    if fmt is None and look.links:
        raise LinkRefused(f"{look.links[0]}: {LINK_NOT_FOLLOWED}")
    return fmt


def detect_source_format(root: Path) -> str | None:
    """detect_format, or the format of train/ when the source holds its splits as folders."""
    return detect_format(root) or detect_format(root / "train")


class _Look:
    """A root's entries as detection sees them: kinds by lstat, links collected (named relative
    to the root) and never looked into."""

    def __init__(self, root: Path):
        self.root = root
        self.links: list[str] = []
        self._listed: dict[str, dict[str, str]] = {}

    def entries(self, folder: str = "") -> dict[str, str]:
        """{name: "dir" | "file" | "link" | "other"} in root/folder ("" the root itself)."""
        if folder not in self._listed:
            self._listed[folder] = _entries(self.root / folder if folder else self.root)
        return self._listed[folder]

    def is_dir(self, name: str) -> bool:
        kind = self.entries().get(name)
        if kind == "link":
            self.links.append(name)
        return kind == "dir"

    def files(self, folder: str, wanted: Callable[[str], bool]) -> list[str]:
        """Regular files of root/folder whose names are `wanted`; linked ones only collected."""
        entries = self.entries(folder) if not folder or self.is_dir(folder) else {}
        names = sorted(name for name in entries if wanted(name))
        self.links += [f"{folder}/{name}" if folder else name for name in names if entries[name] == "link"]
        return [name for name in names if entries[name] == "file"]


def _entries(folder: Path) -> dict[str, str]:
    """`folder` listed through a descriptor opened with O_NOFOLLOW: {} when it is missing, not a
    folder, or a link (the root is resolved by the caller, so no link stands above it)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        with os.scandir(fd) as scan:
            return {entry.name: _kind(entry) for entry in scan}
    finally:
        os.close(fd)


def _kind(entry: os.DirEntry) -> str:
    if entry.is_symlink():
        return "link"
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    return "file" if entry.is_file(follow_symlinks=False) else "other"


def _detected(look: _Look) -> str | None:
    """The rules of detect_format, in its order; every rule runs its checks in full (no short
    circuit) so each link where a format looks is collected."""
    if look.files("annotations", _coco_name) or look.files("", _coco_name):
        return "coco"
    if look.files(ANNOTATION_FOLDER, lambda name: name.endswith(".xml")):
        return "voc"
    if all([look.is_dir(name) for name in LAYOUTS["voc_masks"]]):
        return "voc_masks"
    folders = {name: look.is_dir(name) for name in ("images", "labels")}
    class_files = look.files("", _yolo_name) + look.files("labels", _yolo_name)
    if all(folders.values()) and class_files:
        return "yolo"
    images = [look.is_dir(name) for name in IMAGE_FOLDERS]
    labels = [look.is_dir(name) for name in LABEL_FOLDERS]
    if any(images) and any(labels):
        return "kitti"
    if all([look.is_dir(name) for name in LAYOUTS["index_masks"]]):
        return "rgb_masks" if _holds_rgb_masks(look.root / LAYOUTS["index_masks"][0], look.root) else "index_masks"
    return None


def _coco_name(name: str) -> bool:
    return name.startswith("instances") and name.endswith(".json")


def _yolo_name(name: str) -> bool:
    return name in YOLO_CLASS_FILES


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


def _holds_rgb_masks(folder: Path, root: Path) -> bool:
    """Whether the first mask (listed and opened without following a link) is in colour."""
    try:
        first = next((p for p in list_files(folder, root, lambda _link: None) if p.suffix == ".png"), None)
        if first is None:
            return False
        with open_file(first, root) as handle, Image.open(handle) as image:
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
