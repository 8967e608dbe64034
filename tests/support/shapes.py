"""Drawn shapes with known boxes and masks, and writers of them in each label format the datasets
app reads (detection: KITTI, Pascal VOC XML, COCO JSON, YOLO; segmentation: VOC paletted masks,
grey index masks, RGB masks with a colour map). Numpy and Pillow only.

Boxes are (class, x1, y1, x2, y2) in continuous pixels: a square drawn over columns 10..29 is
x1=10, x2=30. Mask values: 0 background, 1 + the class's index for each shape, as drawn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

CLASSES = ("square", "disc")
COLOURS = {"square": (220, 40, 40), "disc": (40, 200, 60)}
# Segmentation: index 0 is the background, then the shapes' classes.
SEG_CLASSES = ("background", *CLASSES)


@dataclass
class Shapes:
    name: str
    image: np.ndarray  # H x W x 3 uint8
    boxes: list[tuple[str, int, int, int, int]]
    mask: np.ndarray  # H x W uint8, index into SEG_CLASSES


def make_shapes(count: int = 12, *, size: tuple[int, int] = (48, 36), seed: int = 0) -> list[Shapes]:
    """`count` images of `size` (width, height), each with one or two shapes of known classes at
    known places, on a dark noisy background; names are words, not numbers."""
    rng = np.random.default_rng(seed)
    width, height = size
    out = []
    for i in range(count):
        background = rng.integers(0, 40, (height, width, 3), dtype=np.uint8)
        image = Image.fromarray(background)
        mask = Image.new("L", size, 0)
        draw, draw_mask = ImageDraw.Draw(image), ImageDraw.Draw(mask)
        boxes = []
        for j in range(1 + i % 2):
            name = CLASSES[(i + j) % 2]
            w, h = int(rng.integers(10, 18)), int(rng.integers(10, 14))
            x1 = int(rng.integers(0, width // 2 - w // 2)) + j * (width // 2)
            y1 = int(rng.integers(0, height - h))
            x1 = min(x1, width - w)
            shape = [x1, y1, x1 + w - 1, y1 + h - 1]  # Pillow's corners are inclusive
            if name == "square":
                draw.rectangle(shape, fill=COLOURS[name])
                draw_mask.rectangle(shape, fill=SEG_CLASSES.index(name))
            else:
                draw.ellipse(shape, fill=COLOURS[name])
                draw_mask.ellipse(shape, fill=SEG_CLASSES.index(name))
            boxes.append((name, x1, y1, x1 + w, y1 + h))
        out.append(Shapes(f"street_{chr(97 + i % 26)}{i:03d}", np.asarray(image), boxes, np.asarray(mask)))
    return out


def _save(array: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def write_kitti(root: Path, shapes: list[Shapes]) -> Path:
    for s in shapes:
        _save(s.image, root / "images" / f"{s.name}.png")
        lines = [
            f"{c} 0.00 0 0.00 {x1:.2f} {y1:.2f} {x2:.2f} {y2:.2f} 1.5 1.6 3.9 0.0 1.0 10.0 0.0"
            for c, x1, y1, x2, y2 in s.boxes
        ]
        (root / "labels").mkdir(parents=True, exist_ok=True)
        (root / "labels" / f"{s.name}.txt").write_text("\n".join(lines) + "\n")
    return root


def write_voc(root: Path, shapes: list[Shapes]) -> Path:
    (root / "Annotations").mkdir(parents=True, exist_ok=True)
    for s in shapes:
        _save(s.image, root / "JPEGImages" / f"{s.name}.png")
        h, w = s.image.shape[:2]
        objects = "".join(
            f"<object><name>{c}</name><difficult>0</difficult><bndbox><xmin>{x1 + 1}</xmin><ymin>{y1 + 1}</ymin>"
            f"<xmax>{x2}</xmax><ymax>{y2}</ymax></bndbox></object>"
            for c, x1, y1, x2, y2 in s.boxes
        )
        xml = (
            f"<annotation><filename>{s.name}.png</filename><size><width>{w}</width><height>{h}</height>"
            f"<depth>3</depth></size>{objects}</annotation>"
        )
        (root / "Annotations" / f"{s.name}.xml").write_text(xml)
    return root


def write_coco(root: Path, shapes: list[Shapes]) -> Path:
    categories = [{"id": i + 1, "name": c} for i, c in enumerate(CLASSES)]
    images, annotations = [], []
    for i, s in enumerate(shapes):
        _save(s.image, root / "images" / f"{s.name}.png")
        h, w = s.image.shape[:2]
        images.append({"id": i + 1, "file_name": f"{s.name}.png", "width": w, "height": h})
        for c, x1, y1, x2, y2 in s.boxes:
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": i + 1,
                    "category_id": CLASSES.index(c) + 1,
                    "bbox": [x1, y1, x2 - x1, y2 - y1],
                    "area": (x2 - x1) * (y2 - y1),
                    "iscrowd": 0,
                }
            )
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    data = {"images": images, "annotations": annotations, "categories": categories}
    (root / "annotations" / "instances_default.json").write_text(json.dumps(data))
    return root


def write_yolo(root: Path, shapes: list[Shapes]) -> Path:
    (root / "labels").mkdir(parents=True, exist_ok=True)
    (root / "classes.txt").write_text("\n".join(CLASSES) + "\n")
    for s in shapes:
        _save(s.image, root / "images" / f"{s.name}.png")
        h, w = s.image.shape[:2]
        lines = [
            f"{CLASSES.index(c)} {(x1 + x2) / 2 / w:.6f} {(y1 + y2) / 2 / h:.6f} "
            f"{(x2 - x1) / w:.6f} {(y2 - y1) / h:.6f}"
            for c, x1, y1, x2, y2 in s.boxes
        ]
        (root / "labels" / f"{s.name}.txt").write_text("\n".join(lines) + "\n")
    return root


def voc_palette_image(mask: np.ndarray) -> Image.Image:
    from datasets.labels.masks import voc_palette  # the palette the reader knows: one home for it

    image = Image.fromarray(mask, mode="L").convert("P")
    image.putpalette([v for colour in voc_palette() for v in colour])
    return image


def write_voc_masks(root: Path, shapes: list[Shapes], *, labelmap: bool = True) -> Path:
    """VOC SegmentationClass (paletted) beside JPEGImages, with CVAT's labelmap.txt."""
    from datasets.labels.masks import voc_palette  # the palette the reader knows: one home for it

    for s in shapes:
        _save(s.image, root / "JPEGImages" / f"{s.name}.png")
        (root / "SegmentationClass").mkdir(parents=True, exist_ok=True)
        voc_palette_image(s.mask).save(root / "SegmentationClass" / f"{s.name}.png")
    if labelmap:
        palette = voc_palette()
        lines = ["# label:color_rgb:parts:actions"]
        lines += [f"{name}:{','.join(map(str, palette[i]))}::" for i, name in enumerate(SEG_CLASSES)]
        (root / "labelmap.txt").write_text("\n".join(lines) + "\n")
    return root


def write_index_masks(root: Path, shapes: list[Shapes]) -> Path:
    for s in shapes:
        _save(s.image, root / "images" / f"{s.name}.png")
        _save(s.mask, root / "masks" / f"{s.name}.png")
    (root / "labels.txt").write_text("\n".join(SEG_CLASSES) + "\n")
    return root


RGB_COLOURS = ((0, 0, 0), (255, 0, 0), (0, 0, 255))


def write_rgb_masks(root: Path, shapes: list[Shapes]) -> Path:
    for s in shapes:
        _save(s.image, root / "images" / f"{s.name}.png")
        _save(np.asarray(RGB_COLOURS, dtype=np.uint8)[s.mask], root / "masks" / f"{s.name}.png")
    lines = [f"{name}:{','.join(map(str, RGB_COLOURS[i]))}::" for i, name in enumerate(SEG_CLASSES)]
    (root / "labelmap.txt").write_text("\n".join(lines) + "\n")
    return root


def scaled_boxes(shapes: Shapes, width: int, height: int, labels: list[str]) -> np.ndarray:
    """The shapes' boxes as the build stores them after a squash to width x height: N x 6, the
    class an index into the dataset's `labels`."""
    h, w = shapes.image.shape[:2]
    rows = [
        (labels.index(c), x1 * width / w, y1 * height / h, x2 * width / w, y2 * height / h, 0)
        for c, x1, y1, x2, y2 in shapes.boxes
    ]
    return np.asarray(rows, dtype=np.float32).reshape(-1, 6)


def scaled_mask(shapes: Shapes, width: int, height: int) -> np.ndarray:
    """The mask as the build stores it after a squash (nearest neighbour)."""
    return np.asarray(Image.fromarray(shapes.mask, mode="L").resize((width, height), Image.Resampling.NEAREST))


def rle_runs(covered: np.ndarray) -> list[int]:
    """COCO's run lengths of a boolean mask: column order, starting with a run of zeros."""
    flat = covered.T.ravel()
    bounds = np.concatenate([[0], np.flatnonzero(flat[1:] != flat[:-1]) + 1, [flat.size]])
    runs = np.diff(bounds).tolist()
    return [0, *runs] if flat[0] else runs


def rle_string(runs: list[int]) -> str:
    """COCO's compressed RLE text of run lengths (pycocotools' rleToString, in Python)."""
    out = []
    for i, value in enumerate(runs):
        x = value - runs[i - 2] if i > 2 else value
        more = True
        while more:
            c = x & 0x1F
            x >>= 5
            more = x != -1 if c & 0x10 else x != 0
            out.append(chr((c | 0x20 if more else c) + 48))
    return "".join(out)


def write_coco_masks(root: Path, shapes: list[Shapes]) -> Path:
    """COCO instances with squares as polygons (Pillow's inclusive corners) and discs as RLE,
    compressed text for even images and a list of counts for odd ones."""
    write_coco(root, shapes)
    path = root / "annotations" / "instances_default.json"
    data = json.loads(path.read_text())
    by_image: dict[int, list[dict]] = {}
    for annotation in data["annotations"]:
        by_image.setdefault(annotation["image_id"], []).append(annotation)
    for i, s in enumerate(shapes):
        for annotation, (c, x1, y1, x2, y2) in zip(by_image[i + 1], s.boxes, strict=True):
            if c == "square":
                annotation["segmentation"] = [[x1, y1, x2 - 1, y1, x2 - 1, y2 - 1, x1, y2 - 1]]
            else:
                covered = np.zeros(s.mask.shape, dtype=bool)
                covered[y1:y2, x1:x2] = s.mask[y1:y2, x1:x2] == SEG_CLASSES.index("disc")
                runs = rle_runs(covered)
                counts = rle_string(runs) if i % 2 == 0 else runs
                annotation["segmentation"] = {"counts": counts, "size": list(s.mask.shape)}
    path.write_text(json.dumps(data))
    return root


# A writer per label format (datasets.labels.registry), for tests that go through every format.
WRITERS = {
    "kitti": write_kitti,
    "voc": write_voc,
    "coco": write_coco,
    "yolo": write_yolo,
    "voc_masks": write_voc_masks,
    "index_masks": write_index_masks,
    "rgb_masks": write_rgb_masks,
    "coco_masks": write_coco_masks,
}
