"""Label readers for detection and segmentation sources: one module per format, one record each
in the registry (datasets.labels.registry), one detector (datasets.labels.detect).

`detect_format(root)` names the format a folder holds (or None: a classification folder);
`read_labels(root, fmt)` reads it into a LabelSource (images, classes, label report). No Django.
"""

from __future__ import annotations

from pathlib import Path

from datasets.labels.common import LabelError, LabelSource
from datasets.labels.detect import detect_format, detect_format_in_names, detect_source_format
from datasets.labels.registry import FORMAT_TASK, FORMATS, label_format
from datasets.labels.splits import split_by_lists

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


def read_labels(root: Path, fmt: str, *, min_box_size: float = 0) -> LabelSource:
    """Read `root` as `fmt`; LabelError when it cannot be read as that format at all.

    `root` must be resolved (datasets.labels.plan.read_source does it once for a source and its
    split folders): every file is opened from "/" without following a link, so a link above an
    unresolved root would refuse every file, and a root resolved here would follow a linked split."""
    record = label_format(fmt)
    source = record.read(root, min_box_size=min_box_size)
    return split_by_lists(source, root, record.split_lists) if record.split_lists else source
