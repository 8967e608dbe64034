"""The one label-format detector: the registry's layouts (datasets.labels.registry) asked of a
listing of relative paths, a server folder's or an archive's member names. No Django.

Why one rule for both: two detectors once disagreed (an archive's `Annotations/A.XML` was VOC, the
same folder on the server was not; COCO's JSON in an archive's train/ was not looked at), so the
wizard proposed one format and the build read another. Now only the listing differs: a folder is
seen through the one door (datasets.labels.files), an archive through its names. What names alone
cannot say is the colour of a mask: an archive's masks/ beside images/ reads as `index_masks` by
name, and only its task is proposed from that (NAMES_CANNOT_TELL).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from PIL import Image

from datasets.labels.files import LabelError, LinkRefused, NotRegularFile, list_files, open_file
from datasets.labels.registry import LABEL_FORMATS, Layout
from datasets.names import LINK_NOT_FOLLOWED

# DIGITS's layout of separate splits: train/ (val/, test/) folders, each in one format.
SPLIT_FOLDER = "train"
# How many single wrapper folders an archive's names are looked through (as the build extracts).
WRAPPER_DEPTH = 4


class Listing(Protocol):
    """What a layout asks of a source: its folders at the root, the files directly in one of them
    ("" the root) whose names are wanted, and whether a folder's first PNG is in colour."""

    def is_folder(self, name: str) -> bool: ...

    def files(self, folder: str, wanted: Callable[[str], bool]) -> list[str]: ...

    def colour_masks(self, folder: str) -> bool: ...


def recognised(layout: Layout, listing: Listing) -> bool:
    """Whether `listing` holds `layout`: the one rule of a folder and an archive."""
    if not all(any(listing.is_folder(name) for name in group) for group in layout.folders):
        return False
    if layout.file_name is not None and not any(listing.files(f, layout.file_name) for f in layout.file_folders):
        return False
    return layout.colour_masks is None or listing.colour_masks(layout.folders[0][0]) == layout.colour_masks


def detected(listing: Listing) -> str | None:
    """The first registered format whose layout `listing` holds, or None (class folders)."""
    return next((f.name for f in LABEL_FORMATS if f.layout is not None and recognised(f.layout, listing)), None)


# --------------------------------------------------------------------------- an archive's names


class NameListing:
    """An archive's member names (parts of each file's path) as a listing: a folder is there when a
    file lies under it (an archive lists files, not folders); names alone never open a mask."""

    def __init__(self, parts: list[tuple[str, ...]]):
        self.parts = parts
        self._folders = {p[0] for p in parts if len(p) > 1}

    def is_folder(self, name: str) -> bool:
        return name in self._folders

    def files(self, folder: str, wanted: Callable[[str], bool]) -> list[str]:
        inside = (folder,) if folder else ()
        return [p[-1] for p in self.parts if p[:-1] == inside and wanted(p[-1])]

    def colour_masks(self, folder: str) -> bool:
        return False

    def under(self, folder: str) -> NameListing:
        return NameListing([p[1:] for p in self.parts if len(p) > 1 and p[0] == folder])


# Formats an archive's names cannot tell apart (a mask's colour is in the file, not its name):
# what is proposed from names is their task, the format is left to the build, which detects it in
# the extracted folder (datasets.validators.propose_task).
NAMES_CANNOT_TELL = frozenset({"rgb_masks", "index_masks"})


def detect_format_in_names(names: list[tuple[str, ...]]) -> str | None:
    """The format of an archive from its member names, looking through wrapper folders as the
    build does, then in its train/ folder; hidden names and __MACOSX left out as extraction does."""
    parts = [p for p in names if p and not any(x.startswith(".") or x == "__MACOSX" for x in p)]
    for _ in range(WRAPPER_DEPTH):
        if parts and len({p[0] for p in parts}) == 1 and all(len(p) > 1 for p in parts):
            parts = [p[1:] for p in parts]
    listing = NameListing(parts)
    return detected(listing) or detected(listing.under(SPLIT_FOLDER))


# --------------------------------------------------------------------------- a server folder


def detect_format(root: Path) -> str | None:
    """The format of what the folder `root` holds, or None when it holds none of them.

    Nothing is looked at through a link (datasets.labels.files, as the readers): a linked
    Annotations/ is not looked into. A link where any layout looks (one of their folders, COCO's
    JSON, YOLO's class file) refuses the source by its name (LinkRefused), whatever else was found:
    a linked classes.txt is not read as YOLO, nor its images/ and labels/ as KITTI in its place."""
    if os.path.islink(root):  # a split folder (train/) made a link: named, not looked into
        raise LinkRefused(f"{root.name}: {LINK_NOT_FOLLOWED}")
    root = root.parent.resolve() / root.name  # the folders above are the user's choice, checked by the roots
    look = FolderListing(root)
    fmt = detected(look)
    for layout in (f.layout for f in LABEL_FORMATS if f.layout is not None):
        for name in layout.looked_at():
            look.kind(name)
        if layout.file_name is not None and not layout.per_image:
            for folder in layout.file_folders:
                look.linked(folder, layout.file_name)
    if look.links:
        raise LinkRefused(f"{look.links[0]}: {LINK_NOT_FOLLOWED}")
    return fmt


def detect_source_format(root: Path) -> str | None:
    """detect_format, or the format of train/ when the source holds its splits as folders."""
    return detect_format(root) or detect_format(root / SPLIT_FOLDER)


class FolderListing:
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

    def is_folder(self, name: str) -> bool:
        return self.kind(name) == "dir"

    def files(self, folder: str, wanted: Callable[[str], bool]) -> list[str]:
        """Regular files directly in root/folder ("" the root) whose names are `wanted`."""
        return [name for name in self._listed(folder)[0] if wanted(name)]

    def linked(self, folder: str, wanted: Callable[[str], bool]) -> None:
        """Collect the links directly in root/folder whose names are `wanted`."""
        self.links += [f"{folder}/{name}" if folder else name for name in self._listed(folder)[1] if wanted(name)]

    def colour_masks(self, folder: str) -> bool:
        return self.is_folder(folder) and _holds_rgb_masks(self.root / folder, self.root)

    def _listed(self, folder: str) -> tuple[list[str], list[str]]:
        """(regular files, links) directly in root/folder; nothing when it is not a folder."""
        if folder and not self.is_folder(folder):
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
