"""How many bytes each kind of label file may have: one table, a row per kind with its reason.

Why per kind: one cap for every label file had to let COCO's whole-set JSON through (1 GiB), so a
VOC annotation, a YOLO line file or a class list of a gigabyte was parsed too, costing the reader
its memory and minutes of CPU before anything was said. A file of one image's objects or of a set's
class names is kilobytes; each row is far above the largest real file of its kind and far below
what would hurt. Every reader opens its files through datasets.labels.files with its row, which
refuses a larger file by its size before a byte is parsed (and stops reading one that grows).
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20


@dataclass(frozen=True)
class FileLimit:
    what: str  # how a message names this kind of file: "more than the N bytes <what> may have"
    max_bytes: int
    why: str


FILE_LIMITS: dict[str, FileLimit] = {
    "voc_xml": FileLimit(
        "a VOC annotation",
        4 * MIB,
        "one image's objects, about 200 bytes each: 20,000 of them (VOC 2012's largest file is 10 KB)",
    ),
    "kitti_txt": FileLimit("a KITTI label file", 1 * MIB, "one image's objects, about 100 bytes a line: 10,000"),
    "yolo_txt": FileLimit("a YOLO label file", 1 * MIB, "one image's objects, about 40 bytes a line: 25,000"),
    "class_list": FileLimit(
        "a class list",
        1 * MIB,
        "classes.txt, labels.txt, labelmap.txt, colormap.txt: thousands of names of up to 200 characters",
    ),
    "data_yaml": FileLimit(
        "a data.yaml", 1 * MIB, "a few hundred names at most; PyYAML parses in pure Python, so bytes are seconds"
    ),
    "coco_json": FileLimit(
        "a COCO file",
        1 << 30,
        "a whole set's labels in one file: COCO 2017 train's instances JSON is 448 MB, stuff and LVIS near it; "
        "the reader's memory limit (settings.LABEL_READER_MEMORY_MB) bounds what parsing one costs",
    ),
    "split_list": FileLimit(
        "a split list",
        16 * MIB,
        "ImageSets' train.txt, val.txt: one image name a line (VOC 2012's trainval.txt is 200 KB); a million names",
    ),
    "mask": FileLimit(
        "a mask",
        32 * MIB,
        "one image's classes as a PNG of flat regions: a few KB to a few MB even at the largest side an image may "
        "have (datasets.images); a noise-like mask of that size is no mask",
    ),
}


def limit_for(kind: str) -> FileLimit:
    """The row of `kind`; a KeyError names a kind the table lacks (a reader's mistake, not a user's)."""
    return FILE_LIMITS[kind]


def over_limit_text(name: str, size: int, kind: str) -> str:
    """The one wording of a refusal: the file, its size, the limit and the kind of file."""
    row = limit_for(kind)
    return f"{name}: {size} bytes, more than the {row.max_bytes} bytes ({_shown(row.max_bytes)}) {row.what} may have"


def _shown(size: int) -> str:
    return f"{size >> 30} GiB" if size >= 1 << 30 and not size % (1 << 30) else f"{size / MIB:g} MiB"
