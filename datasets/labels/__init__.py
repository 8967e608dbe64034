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
from datasets.labels.files import LinkRefused, NotRegularFile, list_files, open_file
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

    Nothing is looked at through a link (datasets.labels.files, as the readers): a linked
    Annotations/ is not looked into. A link where any rule looks (one of their folders, COCO's JSON,
    YOLO's class file) refuses the source by its name (LinkRefused), whatever else was found: a
    linked classes.txt is not read as YOLO, nor its images/ and labels/ as KITTI in its place."""
    if os.path.islink(root):  # a split folder (train/) made a link: named, not looked into
        raise LinkRefused(f"{root.name}: {LINK_NOT_FOLLOWED}")
    root = root.parent.resolve() / root.name  # the folders above are the user's choice, checked by the roots
    look = _Look(root)
    fmt = _detected(look)
    for name in _LOOKED_AT:  # what any rule looks at: a link there is refused whatever was found
        look.kind(name)
    for folder, wanted in _CLASS_FILES_AT:
        look.linked(folder, wanted)
    if look.links:
        raise LinkRefused(f"{look.links[0]}: {LINK_NOT_FOLLOWED}")
    return fmt


def detect_source_format(root: Path) -> str | None:
    """detect_format, or the format of train/ when the source holds its splits as folders."""
    return detect_format(root) or detect_format(root / "train")


class _Look:
    """A root as detection sees it, only through the one door (datasets.labels.files): a name's kind
    by opening it without following a link, a folder's own files by list_files; links are collected
    (named relative to the root) and never looked into."""

    def __init__(self, root: Path):
        self.root = root
        self.links: list[str] = []
        self._kinds: dict[str, str | None] = {}
        self._files: dict[str, tuple[list[str], list[str]]] = {}

    def kind(self, name: str) -> str | None:
        """ "file", "dir" (or another file that is not regular), "link", or None when missing."""
        if name not in self._kinds:
            self._kinds[name] = _kind(self.root / name, self.root)
            if self._kinds[name] == "link":
                self.links.append(name)
        return self._kinds[name]

    def is_dir(self, name: str) -> bool:
        return self.kind(name) == "dir"

    def files(self, folder: str, wanted: Callable[[str], bool]) -> list[str]:
        """Regular files directly in root/folder ("" the root) whose names are `wanted`."""
        return [name for name in self._listed(folder)[0] if wanted(name)]

    def linked(self, folder: str, wanted: Callable[[str], bool]) -> None:
        """Collect the links directly in root/folder whose names are `wanted`."""
        self.links += [f"{folder}/{name}" if folder else name for name in self._listed(folder)[1] if wanted(name)]

    def _listed(self, folder: str) -> tuple[list[str], list[str]]:
        """(regular files, links) directly in root/folder; nothing when it is not a folder."""
        if folder and not self.is_dir(folder):
            return [], []
        if folder not in self._files:
            path = self.root / folder if folder else self.root
            files: list[str] = []
            links: list[str] = []
            for found in list_files(
                path, self.root, lambda link: links.append(link.name) if link.parent == path else None
            ):
                if found.parent != path:  # list_files gives a folder's own files first: the rest is deeper
                    break
                files.append(found.name)
            self._files[folder] = (files, links)
        return self._files[folder]


def _kind(path: Path, root: Path) -> str | None:
    """What `path` is, asked by opening it as a label reader would, without following a link: a
    folder (or a FIFO) is refused as not a regular file, a link as a link; nothing is read."""
    try:
        with open_file(path, root):
            return "file"
    except LinkRefused:
        return "link"
    except NotRegularFile:
        return "dir"
    except OSError:
        return None


def _detected(look: _Look) -> str | None:
    """The rules of detect_format, in its order."""
    if look.files("annotations", _coco_name) or look.files("", _coco_name):
        return "coco"
    if look.files(ANNOTATION_FOLDER, lambda name: name.endswith(".xml")):
        return "voc"
    if all(look.is_dir(name) for name in LAYOUTS["voc_masks"]):
        return "voc_masks"
    if (
        look.is_dir("images")
        and look.is_dir("labels")
        and look.files("", _yolo_name) + look.files("labels", _yolo_name)
    ):
        return "yolo"
    if any(look.is_dir(name) for name in IMAGE_FOLDERS) and any(look.is_dir(name) for name in LABEL_FOLDERS):
        return "kitti"
    if all(look.is_dir(name) for name in LAYOUTS["index_masks"]):
        return "rgb_masks" if _holds_rgb_masks(look.root / LAYOUTS["index_masks"][0], look.root) else "index_masks"
    return None


# Names detect_format's rules look at in a root, and where they look for a file a format cannot do
# without (COCO's JSON, YOLO's class file); a linked image or .xml is left to its reader to report.
_LOOKED_AT = (
    "annotations",
    ANNOTATION_FOLDER,
    *LAYOUTS["voc_masks"],
    *LAYOUTS["index_masks"],
    *IMAGE_FOLDERS,
    *LABEL_FOLDERS,
)


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
    # A link is not looked into (datasets.labels.files); a mask Pillow refuses from its header alone
    # (more than twice its pixel limit) is the reader's to report, by name, not detection's to crash on.
    except (OSError, LabelError, Image.DecompressionBombError):
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


_CLASS_FILES_AT = (("", _coco_name), ("annotations", _coco_name), ("", _yolo_name), ("labels", _yolo_name))
