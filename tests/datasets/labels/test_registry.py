"""The label-format registry (datasets/labels/registry.py) and its one detector
(datasets/labels/detect.py): a server folder and an archive's member names are recognised by the
same rule, every reader names an image it cannot open, and no format's name is branched on outside
the registry and the readers (issue 32)."""

from __future__ import annotations

import ast
import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from datasets.labels import detect_format, detect_format_in_names, detect_source_format, read_labels
from datasets.labels.common import LabelError
from datasets.labels.registry import FORMATS, LABEL_FORMATS, format_choices, format_for_task, label_format
from datasets.preview import archive_member_names
from tests.conftest import REPO_ROOT
from tests.datasets.conftest import zip_folder
from tests.support import shapes as drawn

SHAPES = drawn.make_shapes(2)
DETECTED = tuple(f.name for f in LABEL_FORMATS if f.layout is not None)


def _png(mode: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((4, 4, 3) if mode == "RGB" else (4, 4), dtype=np.uint8), mode).save(buffer, "PNG")
    return buffer.getvalue()


# The smallest file set each registered format is recognised by (names only matter, except a mask's
# colour). A format added to the registry without a row here fails the first test.
LAYOUTS = {
    "coco": ["annotations/instances_train.json", "images/a.jpg"],
    "voc": ["Annotations/a.xml", "JPEGImages/a.jpg"],
    "voc_masks": ["SegmentationClass/a.png", "JPEGImages/a.jpg"],
    "yolo": ["images/a.jpg", "labels/a.txt", "labels/data.yaml"],
    "kitti": ["image_2/a.png", "label_2/a.txt"],
    "rgb_masks": ["images/a.jpg", "masks/a.png:RGB"],
    "index_masks": ["images/a.jpg", "masks/a.png:L"],
}
# Where the two used to disagree (the archive's detector had rules of its own): now they cannot.
TRICKY = {
    "upper-case XML": ["Annotations/A.XML", "JPEGImages/a.jpg"],
    "COCO JSON at train/'s top": ["train/instances_train.json", "train/images/a.jpg"],
    "YOLO class file in labels/": ["images/a.jpg", "labels/a.txt", "labels/classes.txt"],
    "KITTI in train/": ["train/images/a.png", "train/labels/a.txt", "val/images/b.png"],
    "class folders": ["apple/a.jpg", "kiwi/b.jpg"],
}
# What names alone cannot say: a mask's colour. An archive's masks/ reads as index_masks by name; the
# wizard proposes only its task (detect.NAMES_CANNOT_TELL) and the build looks inside the masks.
NAMES_CANNOT_SAY = {"rgb_masks": "index_masks"}


def _write(root: Path, files: list[str]) -> Path:
    for entry in files:
        name, _, mode = entry.partition(":")
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_png(mode) if mode else b"x")
    return root


def test_it_has_a_layout_fixture_for_every_detected_format():
    assert sorted(LAYOUTS) == sorted(DETECTED)


@pytest.mark.parametrize("files", [*LAYOUTS.values(), *TRICKY.values()], ids=[*LAYOUTS, *TRICKY])
def test_it_detects_a_folder_and_its_archive_alike(tmp_path, files):
    folder = _write(tmp_path / "source", files)
    in_folder = detect_source_format(folder)
    in_names = detect_format_in_names(archive_member_names(zip_folder(folder, tmp_path / "source.zip")))
    assert NAMES_CANNOT_SAY.get(in_folder, in_folder) == in_names


@pytest.mark.parametrize("fmt", list(LAYOUTS))
def test_it_detects_each_format_by_its_registered_layout(tmp_path, fmt):
    assert detect_format(_write(tmp_path / "source", LAYOUTS[fmt])) == fmt


def test_it_reads_an_upper_case_xml_as_no_voc_in_a_folder_or_an_archive(tmp_path):
    # The reader lists Annotations/*.xml; an archive's detector once took .XML as VOC, and the
    # build then found no annotation to read.
    folder = _write(tmp_path / "source", TRICKY["upper-case XML"])
    assert detect_format(folder) is None
    assert detect_format_in_names(archive_member_names(zip_folder(folder, tmp_path / "s.zip"))) is None


WRITERS = drawn.WRITERS


def test_it_has_a_writer_for_every_registered_format():
    assert sorted(WRITERS) == sorted(FORMATS)


@pytest.mark.parametrize("fmt", list(WRITERS))
@pytest.mark.parametrize("labelled", [True, False], ids=["with-labels", "without-labels"])
def test_it_names_an_image_that_cannot_be_opened_once_in_every_reader(tmp_path, fmt, labelled):
    # KITTI, VOC and YOLO named it twice (with its label file, then again as an unlabelled image);
    # COCO and the masks once. Every reader now names it once and leaves it out.
    root = WRITERS[fmt](tmp_path / "source", SHAPES).resolve()
    image = next(p for p in sorted(root.rglob("*.png")) if p.parent.name in ("images", "JPEGImages"))
    image.write_bytes(b"not an image")
    if not labelled and fmt in ("kitti", "yolo"):
        (root / "labels" / f"{image.stem}.txt").unlink()
    elif not labelled and fmt == "voc":
        (root / "Annotations" / f"{image.stem}.xml").unlink()
    source = read_labels(root, fmt)
    name = str(image.relative_to(root))
    assert [(p.file, p.kind) for p in source.report.problems if p.file == name] == [(name, "bad_file")]
    assert name not in [i.name for i in source.images]


def test_it_names_the_formats_when_asked_for_an_unknown_one():
    with pytest.raises(LabelError, match=r"format 'labelme' is not one of coco, voc, .*coco_masks"):
        label_format("labelme")


def test_it_reads_cocos_files_for_their_masks_when_the_task_is_segmentation():
    assert format_for_task("coco", "segmentation") == "coco_masks"
    assert format_for_task("coco", "detection") == "coco"
    assert format_for_task("kitti", "segmentation") == "kitti"  # refused by its caller, who names both
    assert [name for name, _ in format_choices(task="segmentation")] == [
        f.name for f in LABEL_FORMATS if f.task == "segmentation"
    ]


# --------------------------------------------------------------------------- one home for the names

# The registry and the readers (each names its own format in what it gives) may say a format's name.
HOMES = (
    "datasets/labels/registry.py",
    "datasets/labels/coco.py",
    "datasets/labels/kitti.py",
    "datasets/labels/masks.py",
    "datasets/labels/voc.py",
    "datasets/labels/yolo.py",
)
QUOTED = rf"""["'](?:{"|".join(FORMATS)})["']"""
TEXT_BRANCH = re.compile(rf"format\s*(?:===?|!==?)\s*{QUOTED}|{QUOTED}\s*(?:===?|!==?)\s*[\w.]*format")


def _names_a_format(node: ast.AST) -> bool:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(map(_names_a_format, node.elts))
    return isinstance(node, ast.Constant) and node.value in FORMATS


def _python_branches(source: str) -> list[int]:
    """Lines of a comparison (==, !=, in) or a dict key or match case with a format's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(map(_names_a_format, [node.left, *node.comparators])):
            found.append(node.lineno)
        elif isinstance(node, ast.Dict) and any(key is not None and _names_a_format(key) for key in node.keys):
            found.append(node.lineno)
        elif isinstance(node, ast.MatchValue) and _names_a_format(node.value):
            found.append(node.lineno)
    return found


def _branches() -> list[str]:
    found = []
    for folder, pattern in (("datasets", "*.py"), ("static/datasets", "*.js"), ("templates/datasets", "*.html")):
        for path in sorted((REPO_ROOT / folder).rglob(pattern)):
            name = path.relative_to(REPO_ROOT).as_posix()
            if name in HOMES or "migrations" in path.parts:
                continue
            text = path.read_text(encoding="utf-8")
            if path.suffix == ".py":
                found += [f"{name}:{line}" for line in _python_branches(text)]
            else:
                found += [f"{name}:{text[: m.start()].count(chr(10)) + 1}" for m in TEXT_BRANCH.finditer(text)]
    return found


def test_it_finds_no_branch_on_a_format_name_outside_the_registry():
    assert _branches() == [], "give the format's record the rule (datasets/labels/registry.py)"


def test_it_catches_a_format_branch_in_python_a_template_and_a_script():
    assert _python_branches('if fmt == "coco" and task == SEGMENTATION:\n    pass\n') == [1]
    assert _python_branches('if fmt in ("voc_masks", "index_masks"):\n    pass\n') == [1]
    assert _python_branches('READERS = {"kitti": read_kitti}\n') == [1]
    assert _python_branches('match fmt:\n    case "yolo":\n        pass\n') == [2]
    assert TEXT_BRANCH.search("{% if dataset.source.format == 'kitti' %}")
    assert TEXT_BRANCH.search('const boxes = check.format === "yolo";')
    assert not TEXT_BRANCH.search("{{ check.format }} labels")
