"""A source's own split, as its format writes it: VOC's `ImageSets/Segmentation/train.txt`,
`val.txt` (and `test.txt`), `ImageSets/Main/...` for its boxes, one image name (without suffix) per
line. DIGITS's and torchvision's users expect the set's own split to be the split, so where
`train.txt` is there, each image takes the split of the list that names it, the percentages and the
seed are not used, and an image that no list names is left out, reported by name (VOC's masks
folder holds the train and val images only; its JPEGImages/ holds the whole set).

No Django here. The lists are read through the one door (datasets.labels.files) within their kind's
byte limit; a link is refused by name.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from datasets.labels.common import LabelSource
from datasets.labels.files import limited_lines

LIST_SPLITS = ("train", "val", "test")


def split_by_lists(source: LabelSource, root: Path, folder: str) -> LabelSource:
    """`source` with each image's split taken from `root/folder/<split>.txt` when train.txt is there
    (`source.own_split` says which lists and how many images each gave); unchanged otherwise."""
    lists = root / folder
    if not (lists / "train.txt").is_file():
        return source
    named: dict[str, str] = {}
    read = []
    for split in LIST_SPLITS:
        path = lists / f"{split}.txt"
        if split != "train" and not path.is_file():
            continue
        read.append(f"{split}.txt")
        for _, line in limited_lines(path, root, "split_list"):
            words = line.split()
            if words:  # ImageSets/Main/<class>_train.txt lines are "name flag": the name comes first
                named.setdefault(words[0], split)  # a name in two lists keeps the first (train)
    kept = []
    for image in source.images:
        split = named.get(PurePosixPath(image.name).stem)
        if split is None:
            source.report.add(image.name, None, "unlisted", f"in none of {folder}/{', '.join(read)}")
            continue
        image.split = split
        kept.append(image)
    source.images = kept
    counts = {split: sum(1 for image in kept if image.split == split) for split in LIST_SPLITS}
    source.own_split = {
        "lists": [f"{folder}/{name}" for name in read],
        "counts": {s: n for s, n in counts.items() if n},
    }
    return source
