"""Segmentation masks beside images, one PNG per image with the same relative name:

- `voc_masks`: VOC's `SegmentationClass/` (paletted PNG, the palette index is the class) beside
  `JPEGImages/`;
- `index_masks`: `masks/` beside `images/`, grey (or paletted) PNGs whose value is the class;
- `rgb_masks`: `masks/` beside `images/`, RGB PNGs whose colour is the class, looked up in the
  colour map (`labelmap.txt` as CVAT writes it, or DIGITS's `colormap.txt`, "r g b" per class).

255 is ignore everywhere. Class names: `labelmap.txt` (CVAT's VOC export: `name:r,g,b::` lines, in
index order), else `labels.txt` (one name per line), else VOC's 21 names.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from datasets.images import ImageRefused
from datasets.labels.common import (
    AnnotatedImage,
    LabelError,
    LabelReport,
    LabelSource,
    MaskFormat,
    checked_class_names,
    files_under,
    image_size,
    images_by_stem,
    name_lines,
    open_image,
    read_text,
    relative_name,
)
from datasets.labels.files import LinkRefused
from datasets.names import LINK_NOT_FOLLOWED, shown_name
from trainer.protocol import IGNORE_INDEX, SEGMENTATION
from workbench.core.numbers import NumberError, bounded_number

VOC_CLASSES = (
    "background aeroplane bicycle bird boat bottle bus car cat chair cow diningtable dog horse "
    "motorbike person pottedplant sheep sofa train tvmonitor"
).split()
LAYOUTS = {"voc_masks": ("SegmentationClass", "JPEGImages"), "index_masks": ("masks", "images")}
LAYOUTS["rgb_masks"] = LAYOUTS["index_masks"]
# Distinct colours one RGB mask may hold: a colour per class (a mask's classes fit a byte, so 256 at
# most) and room for unknown ones (a few tools' anti-aliased borders, read as ignore). A mask of
# millions of colours is no mask: refused after the first block that shows it, not after sorting
# all its pixels (np.unique of 16.7 million colours took seconds and a gigabyte).
MAX_MASK_COLOURS = 1024
# Pixels whose colours are gathered at a time while counting them.
COLOUR_BLOCK = 1 << 16


def voc_palette(n: int = 256) -> list[tuple[int, int, int]]:
    """VOC's colour of each index (the bit-interleaving palette of its devkit)."""
    colours = []
    for index in range(n):
        r = g = b = 0
        c = index
        for shift in range(7, -1, -1):
            r |= (c & 1) << shift
            g |= ((c >> 1) & 1) << shift
            b |= ((c >> 2) & 1) << shift
            c >>= 3
        colours.append((r, g, b))
    return colours


def mask_folders(root: Path, fmt: str) -> tuple[Path, Path] | None:
    masks, images = LAYOUTS[fmt]
    return (root / masks, root / images) if (root / masks).is_dir() and (root / images).is_dir() else None


def read_class_names(root: Path, mask_folder: Path) -> tuple[list[str], dict[tuple[int, int, int], int], str]:
    """(names, colour -> index, where they came from)."""
    for folder in (root, mask_folder):
        labelmap = folder / "labelmap.txt"
        if labelmap.is_file():
            names, colours = _parse_labelmap(labelmap, root)
            return names, colours, relative_name(labelmap, root)
    for folder in (root, mask_folder):
        labels = folder / "labels.txt"
        if labels.is_file():
            names = [name for name in name_lines(read_text(labels, root, "class_list")) if name]
            if not names:
                raise LabelError(f"{relative_name(labels, root)}: no class names")
            checked_class_names(names, relative_name(labels, root))
            colours = _parse_colormap(folder / "colormap.txt", root, len(names))
            return names, colours, relative_name(labels, root)
    palette = voc_palette()
    colours = {palette[i]: i for i in range(len(VOC_CLASSES))}
    colours[palette[IGNORE_INDEX]] = IGNORE_INDEX  # VOC's cream object borders
    return list(VOC_CLASSES), colours, "VOC's 21 classes"


def _parse_labelmap(path: Path, root: Path) -> tuple[list[str], dict[tuple[int, int, int], int]]:
    names: list[str] = []
    colours: dict[tuple[int, int, int], int] = {}
    lines = read_text(path, root, "class_list").split("\n")  # "\n" alone: see name_lines
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, rest = line.partition(":")
        colour_text = rest.split(":", 1)[0].strip()
        if colour_text:
            colour = _colour(colour_text, f"{relative_name(path, root)} line {number}")
            colours[colour] = len(names)
        names.append(name.strip())
    if not names:
        raise LabelError(f"{relative_name(path, root)}: no class names")
    return checked_class_names(names, relative_name(path, root)), colours


def _parse_colormap(path: Path, root: Path, classes: int) -> dict[tuple[int, int, int], int]:
    if not path.is_file():
        return {}
    colours = {}
    lines = read_text(path, root, "class_list").split("\n")  # "\n" alone, as the label map's lines
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        colours[_colour(line, f"{relative_name(path, root)} line {number}")] = len(colours)
    if len(colours) > classes:
        raise LabelError(f"{relative_name(path, root)}: {len(colours)} colours for {classes} classes")
    return colours


def _colour(text: str, where: str) -> tuple[int, int, int]:
    """r, g, b (each 0..255, through the one bounded parser) of a colour map's "r,g,b" or "r g b"."""
    parts = text.replace(",", " ").split()
    try:
        if len(parts) != 3:
            raise NumberError("give three numbers from 0 to 255")
        r, g, b = (bounded_number(v, field=c, low=0, high=255, integer=True) for v, c in zip(parts, "rgb", strict=True))
    except NumberError as error:
        raise LabelError(f"{where}: colour {shown_name(text)!r} is not r,g,b ({error})") from None
    return r, g, b


def read_masks(root: Path, fmt: str = "voc_masks") -> LabelSource:
    folders = mask_folders(root, fmt)
    if folders is None:
        masks, images = LAYOUTS[fmt]
        raise LabelError(f"{fmt} needs a {masks}/ folder of PNG masks beside an {images}/ folder")
    mask_folder, image_folder = folders
    names, colours, _ = read_class_names(root, mask_folder)
    if fmt == "rgb_masks" and not colours:
        raise LabelError("RGB masks need a colour map: labelmap.txt (name:r,g,b::) or colormap.txt beside labels.txt")
    mask_format = MaskFormat("rgb" if fmt == "rgb_masks" else "index", colours)
    report = LabelReport()
    images = images_by_stem(image_folder, root, report)
    masks = {str(p.relative_to(mask_folder).with_suffix("")): p for p in files_under(mask_folder, ".png", root, report)}
    found = []
    for stem, image_path in images.items():
        image_name = relative_name(image_path, root)
        mask_path = masks.pop(stem, None)
        if mask_path is None:
            report.add(image_name, None, "missing_mask", f"no mask {stem}.png in {mask_folder.name}/")
            continue
        size = image_size(image_path, root, report)
        if size is None:
            continue
        present = check_mask(mask_path, relative_name(mask_path, root), size, names, mask_format, report)
        if present is not None:
            found.append(AnnotatedImage(str(image_path), image_name, *size, mask=str(mask_path), present=present))
    for stem, mask_path in masks.items():
        report.add(relative_name(mask_path, root), None, "missing_image", f"no image {stem}.* in {image_folder.name}/")
    return LabelSource(SEGMENTATION, fmt, names, found, report, mask_format=mask_format)


def load_mask(path: str | Path, mask_format: MaskFormat, where: str) -> tuple[np.ndarray, bool]:
    """The mask as H x W uint8 source class indexes (255 = ignore), and whether it held colours
    not in the colour map (read as ignore). `path` is opened without following a link (the
    build worker reads masks through here too)."""
    try:
        with open_image(path, kind="mask", name=where) as image:  # the image-size rule, from its header
            image.load()
            mode = image.mode
            if mode in ("P", "L"):
                values = np.array(image, dtype=np.uint8)
            elif mode in ("RGB", "RGBA") and mask_format.colours:
                rgb = np.array(image.convert("RGB"), dtype=np.uint8)
                return _colours_to_index(rgb, mask_format.colours, where)
            elif mode in ("RGB", "RGBA"):
                raise LabelError(
                    f"{where}: an RGB mask, not a paletted or grey one: give its colour map "
                    "(labelmap.txt) and the format rgb_masks, or save the masks with a palette"
                )
            else:
                raise LabelError(f"{where}: mask mode {mode} is not a paletted, grey or RGB PNG")
    except ImageRefused as exc:
        raise LabelError(f"{where}: {exc}") from None
    except LinkRefused:
        raise LabelError(f"{where}: {LINK_NOT_FOLLOWED}") from None
    except (OSError, UnidentifiedImageError, ValueError, Image.DecompressionBombError) as exc:
        if isinstance(exc, LabelError):
            raise
        raise LabelError(f"{where}: not a PNG that can be opened") from None
    return values, False


def _colours_to_index(rgb: np.ndarray, colours: dict[tuple[int, int, int], int], where: str) -> tuple[np.ndarray, bool]:
    """Class indexes of an RGB mask; colours not in the map become ignore (and are said to be there).
    Vectorised: colours packed into one uint32, their distinct values gathered a block at a time (so
    a mask of too many is refused early) and looked up by searchsorted; LabelError past MAX_MASK_COLOURS."""
    packed = (rgb[..., 0].astype(np.uint32) << 16) | (rgb[..., 1].astype(np.uint32) << 8) | rgb[..., 2]
    flat = packed.ravel()
    found = np.empty(0, dtype=np.uint32)
    for start in range(0, flat.size, COLOUR_BLOCK):
        found = np.union1d(found, flat[start : start + COLOUR_BLOCK])
        if found.size > MAX_MASK_COLOURS:
            raise LabelError(
                f"{where}: more than {MAX_MASK_COLOURS} distinct colours; an RGB mask holds one colour per class "
                "(at most 256)"
            )
    keys = np.array([(r << 16) | (g << 8) | b for r, g, b in colours], dtype=np.uint32)
    values = np.array(list(colours.values()), dtype=np.int64)
    order = np.argsort(keys)
    keys, values = keys[order], values[order]
    at = np.minimum(np.searchsorted(keys, found), keys.size - 1)
    known = keys[at] == found
    table = np.where(known, values[at], IGNORE_INDEX).astype(np.uint8)
    return table[np.searchsorted(found, flat)].reshape(packed.shape), not bool(known.all())


def check_mask(
    path: Path, name: str, size: tuple[int, int], classes: list[str], mask_format: MaskFormat, report: LabelReport
) -> frozenset[int] | None:
    """The source class indexes the mask holds, or None (reported) when it cannot be used."""
    try:
        values, unknown_colours = load_mask(path, mask_format, name)
    except LabelError as exc:
        report.add(name, None, "bad_mask", str(exc))
        return None
    height, width = values.shape[:2]
    if (width, height) != tuple(size):
        report.add(name, None, "bad_mask", f"mask is {width}x{height} but its image is {size[0]}x{size[1]}")
        return None
    present = np.flatnonzero(np.bincount(values.ravel(), minlength=256))  # linear, unlike np.unique's sort
    unknown = [int(v) for v in present if v >= len(classes) and v != IGNORE_INDEX]
    if unknown or unknown_colours:
        what = f"values {', '.join(map(str, unknown[:10]))}" if unknown else "colours not in the colour map"
        report.add(name, None, "mask_values", f"{what} are not one of the {len(classes)} classes: read as ignore (255)")
    return frozenset(int(v) for v in present if v < len(classes))
