"""What every label reader gives: annotated images, the source's classes and a label report.

No Django here: the build's planner, the wizard's preview, the API and the tests use it alike.
Boxes are x1, y1, x2, y2 in the source image's pixels, continuous coordinates (a box covering
pixel columns 10..29 is x1=10, x2=30); each reader converts its format's convention to that.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from datasets.images import ImageRefused, check_image_size, image_limits
from datasets.labels.files import (
    LabelError,
    LinkRefused,
    TooLarge,
    file_size,
    limited_lines,
    list_files,
    open_file,
    read_limited,
    relative_name,
)
from datasets.labels.limits import limit_for, over_limit_text
from datasets.names import LINK_NOT_FOLLOWED, class_name_problem, name_lines, shown_name
from trainer.protocol import DETECTION, SEGMENTATION
from workbench.core.numbers import bounded_number

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm")
# How many problems a report keeps by file and line (every problem is still counted by kind).
REPORT_LIMIT = 1000
# A box corner or polygon point further out than this is no coordinate of an image (their sides
# are far smaller: datasets.images), only a way to make a number that overflows later. YOLO's
# relative numbers are held to it too: times a side, they stay finite.
MAX_COORDINATE = 1e6
# A box past the border by less than this (pixels) is clipped without a word: the rounding of
# YOLO's relative coordinates and of tools that write the last pixel's far edge.
OUTSIDE_SLACK = 0.5

# The kinds of problem a report counts, and what each does to the box or image.
PROBLEM_KINDS = {
    "malformed": "line or entry not understood: left out",
    "outside": "box outside the image: clipped to it, left out when nothing remains",
    "zero_area": "box of zero area: left out",
    "small": "box under the minimum size: kept as an ignore region",
    "unknown_class": "class not in the class list: left out",
    "missing_image": "labels without an image: left out",
    "missing_mask": "image without a mask: left out",
    "bad_mask": "mask cannot be used: image left out",
    "mask_values": "mask values not in the palette: read as ignore (255)",
    "bad_file": "label file cannot be read: left out",
    "link": "symbolic link inside the source: not followed, left out",
    "class_name": "class name not allowed (empty, too long, or a line break or other control character): left out",
    "unlisted": "image in none of the source's own split lists (ImageSets): left out",
}

__all__ = ["LabelError", "LinkRefused", "name_lines", "relative_name"]  # homes: datasets.labels.files, datasets.names


@dataclass
class Problem:
    file: str
    line: int | None
    kind: str
    message: str

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "kind": self.kind, "message": self.message}


@dataclass
class LabelReport:
    """Every problem found, named by file and line (the first REPORT_LIMIT kept; all counted)."""

    problems: list[Problem] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)

    def add(self, file: str, line: int | None, kind: str, message: str) -> None:
        if kind not in PROBLEM_KINDS:
            raise ValueError(f"unknown problem kind {kind!r}")
        self.counts[kind] += 1
        if len(self.problems) < REPORT_LIMIT:
            # The problem's file names it; a refusal's own "file: ..." would name it twice.
            self.problems.append(Problem(file, line, kind, message.removeprefix(f"{file}: ")))

    def as_dict(self) -> dict:
        return {
            "counts": dict(sorted(self.counts.items())),
            "meaning": {kind: PROBLEM_KINDS[kind] for kind in sorted(self.counts)},
            "problems": [p.as_dict() for p in self.problems],
            "truncated": sum(self.counts.values()) > len(self.problems),
        }


@dataclass(frozen=True)
class Box:
    """One object: its class in the source (None for a region without a class, e.g. DontCare)."""

    class_name: str | None
    x1: float
    y1: float
    x2: float
    y2: float
    ignore: bool = False


@dataclass
class AnnotatedImage:
    path: str  # absolute, for the build
    name: str  # relative to the source root, for messages
    width: int = 0
    height: int = 0
    boxes: list[Box] = field(default_factory=list)
    labelled: bool = True  # had a label file or entry (detection); False: an image without labels
    mask: str | None = None  # absolute mask path (segmentation)
    present: frozenset[int] = frozenset()  # source class indexes in the mask (segmentation)
    # COCO masks: (source class index or 255, "polygons" | "rle", points or run lengths) per object.
    shapes: tuple = ()
    split: str | None = None  # the source's own split (train/, val/, test/ folders), else None


@dataclass
class MaskFormat:
    """How a segmentation source's masks hold classes: `index` (grey or paletted PNG, the value is
    the source class index), `rgb` (colours looked up in `colours`, colour -> class index) or
    `shapes` (COCO polygons and RLE, drawn by the build)."""

    mode: str = "index"
    colours: dict[tuple[int, int, int], int] = field(default_factory=dict)


@dataclass
class LabelSource:
    """What a reader found: the task, its format, the source's classes in order, the images and the
    report. Segmentation sources also say how their masks hold classes."""

    task: str
    format: str
    classes: list[str]
    images: list[AnnotatedImage]
    report: LabelReport
    mask_format: MaskFormat | None = None
    # The source's own split lists, when it has them (datasets.labels.splits): {"lists", "counts"}.
    own_split: dict | None = None

    def class_counts(self) -> dict[str, int]:
        """Detection: instances per class (ignore regions not counted); segmentation: images
        whose mask holds the class."""
        counts = dict.fromkeys(self.classes, 0)
        if self.task == DETECTION:
            for image in self.images:
                for box in image.boxes:
                    if box.class_name is not None and not box.ignore:
                        counts[box.class_name] = counts.get(box.class_name, 0) + 1
        elif self.task == SEGMENTATION:
            for image in self.images:
                for index in image.present:
                    if index < len(self.classes):
                        counts[self.classes[index]] += 1
        return counts


def coordinate(value, field: str) -> float:
    """A box corner, polygon point or YOLO number of a label file (its text or a JSON value): a
    finite number within MAX_COORDINATE, through the one bounded parser; NumberError names `field`."""
    return float(bounded_number(value, field=field, low=-MAX_COORDINATE, high=MAX_COORDINATE))


@contextmanager
def open_image(path: str | Path, root: Path | None = None, *, kind: str | None = None, name: str | None = None):
    """An image (or mask) of the source opened through the one door, header only, and judged by the
    image-size rule (datasets.images.check_image_size) before a pixel is decoded: ImageRefused with
    the rule's words. With `kind`, the file is also held to that kind's byte limit (a mask's).

    Pillow refuses a header of more than twice its pixel limit inside Image.open, before the rule
    can see its sides (a 60000 x 60000 PNG of 100 bytes): that is said in the rule's words too."""
    with open_file(path, root) as handle:
        if kind is not None and file_size(handle) > limit_for(kind).max_bytes:
            shown = name or (relative_name(Path(path), root) if root else Path(path).name)
            raise TooLarge(over_limit_text(shown, file_size(handle), kind))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the rule below says it
                image = Image.open(handle)
        except Image.DecompressionBombError:
            limit = image_limits().max_pixels
            claim = "its header claims more than twice that"
            raise ImageRefused(f"image is over the limit of {limit} pixels ({claim})") from None
        with image:
            check_image_size(*image.size)
            yield image


def image_size(path: Path, root: Path, report: LabelReport) -> tuple[int, int] | None:
    """(width, height) from the image's header, or None (reported by name) when it is a link, over
    the image-size rule or not an image that can be opened."""
    try:
        with open_image(path, root) as image:
            return image.size
    except LinkRefused:
        report.add(relative_name(path, root), None, "link", LINK_NOT_FOLLOWED)
    except ImageRefused as exc:
        report.add(relative_name(path, root), None, "bad_file", str(exc))
    except (OSError, UnidentifiedImageError, ValueError, Image.DecompressionBombError):
        report.add(relative_name(path, root), None, "bad_file", "not an image that can be opened")
    return None


def _link_reporter(root: Path, report: LabelReport):
    return lambda path: report.add(relative_name(path, root), None, "link", LINK_NOT_FOLLOWED)


def images_by_stem(folder: Path, root: Path, report: LabelReport) -> dict[str, Path]:
    """Image files under `folder` by their path without suffix, relative to it ("a/b" for a/b.png);
    links are left out and reported (datasets.labels.files)."""
    found: dict[str, Path] = {}
    for path in list_files(folder, root, _link_reporter(root, report)):
        if path.suffix.lower() in IMAGE_SUFFIXES:
            found.setdefault(str(path.relative_to(folder).with_suffix("")), path)
    return found


def files_under(folder: Path, suffix: str, root: Path, report: LabelReport) -> list[Path]:
    """Files with `suffix` under `folder`, sorted, hidden ones left out, links left out and reported."""
    return sorted(p for p in list_files(folder, root, _link_reporter(root, report)) if p.name.endswith(suffix))


def read_text(path: Path, root: Path, kind: str) -> str:
    """A label file's whole text, within `kind`'s byte limit (datasets.labels.limits); LabelError for
    a link, or one too large or not UTF-8 (named, never parsed)."""
    data = read_limited(path, root, kind)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LabelError(f"{relative_name(path, root)}: not UTF-8 text (byte {exc.start})") from None


def class_name_refused(report: LabelReport, where: tuple[str, int | None], name: object) -> bool:
    """True (and reported at `where`) when `name` breaks the class-name rule (datasets.names)."""
    problem = class_name_problem(name)
    if problem is None:
        return False
    shown = shown_name(name) if isinstance(name, str) else type(name).__name__
    report.add(*where, "class_name", f"{shown!r}: {problem}")
    return True


def checked_class_names(names: list, file: str) -> list[str]:
    """A class list whose position is the class id (classes.txt, data.yaml, labels.txt,
    labelmap.txt): every name must pass the class-name rule, else LabelError naming the file and
    entry (leaving one out would shift every later id)."""
    for number, name in enumerate(names, start=1):
        problem = class_name_problem(name)
        if problem is not None:
            shown = f"{shown_name(name)!r}" if isinstance(name, str) else type(name).__name__
            raise LabelError(f"{file}: class {number} ({shown}): {problem}")
    return names


# One line of a KITTI or YOLO file -> its box as written (None: nothing, or reported at `where`).
LineParser = Callable[[str, tuple[str, int], AnnotatedImage, LabelReport], Box | None]


def labelled_text_files(
    root: Path,
    folders: tuple[Path, Path],
    images: dict[str, Path],
    report: LabelReport,
    *,
    kind: str,
    parse_line: LineParser,
    min_box_size: float,
    skip: tuple[str, ...] = (),
) -> dict[str, AnnotatedImage | None]:
    """KITTI's and YOLO's one .txt per image: {stem: its image with the boxes of its label file}
    for every label file under the label folder (`folders`: images, labels; `images` by stem), read
    line by line within `kind`'s byte limit. A label file that cannot be read (too large, not UTF-8)
    is reported and its image left out (None): it is no image without objects; so is an image that
    cannot be opened, reported by name once (as every reader does)."""
    image_folder, label_folder = folders
    labelled: dict[str, AnnotatedImage | None] = {}
    for label_file in files_under(label_folder, ".txt", root, report):
        if label_file.name in skip:
            continue
        stem = str(label_file.relative_to(label_folder).with_suffix(""))
        name = relative_name(label_file, root)
        image_path = images.get(stem)
        if image_path is None:
            report.add(name, None, "missing_image", f"no image {stem}.* in {image_folder.name}/")
            continue
        size = image_size(image_path, root, report)
        if size is None:  # named once, here: with_unlabelled must not open it and name it again
            labelled[stem] = None
            continue
        image = AnnotatedImage(str(image_path), relative_name(image_path, root), *size)
        try:
            image.boxes = _boxes_of(label_file, root, kind, image, report, parse_line, min_box_size)
        except LabelError as exc:
            report.add(name, None, "bad_file", str(exc))
            labelled[stem] = None
            continue
        labelled[stem] = image
    return labelled


def _boxes_of(label_file: Path, root: Path, kind: str, image: AnnotatedImage, report, parse_line, min_box_size):
    name = relative_name(label_file, root)
    boxes = []
    for number, line in limited_lines(label_file, root, kind):
        box = parse_line(line, (name, number), image, report)
        if box is not None:
            box = checked_box(report, (name, number), box, image.width, image.height, min_box_size)
        if box is not None:
            boxes.append(box)
    return boxes


def with_unlabelled(
    root: Path, images: dict[str, Path], labelled: dict[str, AnnotatedImage | None], report: LabelReport
) -> list[AnnotatedImage]:
    """Every image in `images`: the labelled ones as read, the others as images without labels
    (reported when they cannot be opened); one left out while its label file was read (None: the
    label file refused, or the image already reported) is not opened again."""
    found = []
    for stem, path in images.items():
        if stem in labelled:
            if labelled[stem] is not None:
                found.append(labelled[stem])
            continue
        size = image_size(path, root, report)
        if size is None:
            continue
        found.append(AnnotatedImage(str(path), relative_name(path, root), *size, labelled=False))
    return found


def checked_box(
    report: LabelReport,
    where: tuple[str, int | None],
    box: Box,
    width: int,
    height: int,
    min_size: float,
) -> Box | None:
    """The box as the build keeps it (clipped, or an ignore region when small), or None when
    nothing usable remains; every change is reported at `where` (file, line)."""
    file, line = where
    values = (box.x1, box.y1, box.x2, box.y2)
    if not all(math.isfinite(v) for v in values):
        report.add(file, line, "malformed", "box coordinates are not finite numbers")
        return None
    if box.x2 <= box.x1 or box.y2 <= box.y1:
        report.add(file, line, "zero_area", f"box {_box_text(box)} has zero area (x2 <= x1 or y2 <= y1)")
        return None
    if width and height and (box.x1 < 0 or box.y1 < 0 or box.x2 > width or box.y2 > height):
        slack = OUTSIDE_SLACK
        within = box.x1 >= -slack and box.y1 >= -slack and box.x2 <= width + slack and box.y2 <= height + slack
        clipped = Box(
            box.class_name,
            min(max(box.x1, 0.0), width),
            min(max(box.y1, 0.0), height),
            min(max(box.x2, 0.0), width),
            min(max(box.y2, 0.0), height),
            box.ignore,
        )
        if clipped.x2 <= clipped.x1 or clipped.y2 <= clipped.y1:
            report.add(file, line, "outside", f"box {_box_text(box)} lies outside the {width}x{height} image")
            return None
        if not within:
            report.add(
                file, line, "outside", f"box {_box_text(box)} reaches outside the {width}x{height} image: clipped"
            )
        box = clipped
    if min_size and not box.ignore and min(box.x2 - box.x1, box.y2 - box.y1) < min_size:
        report.add(
            file,
            line,
            "small",
            f"box {_box_text(box)} is under the minimum size of {min_size:g} px: kept as an ignore region",
        )
        box = Box(box.class_name, box.x1, box.y1, box.x2, box.y2, True)
    return box


def _box_text(box: Box) -> str:
    return f"({box.x1:g}, {box.y1:g}, {box.x2:g}, {box.y2:g})"
