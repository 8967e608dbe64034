"""Links inside a label source are never followed (datasets.labels.files): a table of the files
each reader opens by name or lists, each turned into a link to a secret outside the source, run
through the label check and through a build; the reader's own code is scanned for other doors."""

from __future__ import annotations

import ast
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from datasets import building, services
from datasets.images import ImageRefused
from datasets.labels.common import LabelError
from datasets.labels.plan import label_check
from datasets.labels.prepare import prepare_annotated
from datasets.models import Dataset
from tests.support import shapes as drawn

SHAPES = drawn.make_shapes(4)
SECRET = "TOPSECRET-key-of-the-server"
FIRST = SHAPES[0].name

# (format writer, task, the file or folder made a link, what it points at, whether the whole
# source is refused (a file whose position or content the source cannot do without) or the link
# is left out and named in the report).
LINKS = [
    ("yolo", "detection", "classes.txt", "secret.txt", "refused"),
    ("yolo_yaml", "detection", "data.yaml", "secret.txt", "refused"),
    ("yolo", "detection", "images", "elsewhere", "refused"),
    ("yolo", "detection", f"images/{FIRST}.png", "other.png", "reported"),
    ("kitti", "detection", f"labels/{FIRST}.txt", "secret.txt", "reported"),
    ("kitti", "detection", f"images/{FIRST}.png", "other.png", "reported"),
    ("kitti", "detection", "labels", "elsewhere", "refused"),
    ("voc", "detection", f"Annotations/{FIRST}.xml", "secret.txt", "reported"),
    ("voc", "detection", f"JPEGImages/{FIRST}.png", "other.png", "reported"),
    ("coco", "detection", "annotations/instances_default.json", "secret.txt", "refused"),
    ("coco", "detection", f"images/{FIRST}.png", "other.png", "reported"),
    ("voc_masks", "segmentation", "labelmap.txt", "secret.txt", "refused"),
    ("index_masks", "segmentation", "labels.txt", "secret.txt", "refused"),
    ("index_masks", "segmentation", f"masks/{FIRST}.png", "other.png", "reported"),
]


def _write_yolo_yaml(root: Path, shapes) -> Path:
    drawn.write_yolo(root, shapes)
    (root / "classes.txt").unlink()
    (root / "data.yaml").write_text(f"names: [{', '.join(drawn.CLASSES)}]\n")
    return root


def _write_index_masks_with_labels(root: Path, shapes) -> Path:
    drawn.write_index_masks(root, shapes)
    if not (root / "labels.txt").exists():
        (root / "labels.txt").write_text("\n".join(drawn.SEG_CLASSES) + "\n")
    return root


WRITERS = {
    "yolo": drawn.write_yolo,
    "yolo_yaml": _write_yolo_yaml,
    "kitti": drawn.write_kitti,
    "voc": drawn.write_voc,
    "coco": drawn.write_coco,
    "voc_masks": drawn.write_voc_masks,
    "index_masks": _write_index_masks_with_labels,
}


def _outside(base: Path) -> Path:
    """What a link points at: a secret, another user's image and folder of images, outside the
    source but inside the import root (so only the link rule can keep them out)."""
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    shutil.copy(drawn_image(base), outside / "other.png")
    (outside / "elsewhere").mkdir()
    shutil.copy(drawn_image(base), outside / "elsewhere" / f"{SECRET}.png")
    return outside


def drawn_image(base: Path) -> Path:
    path = base / "drawn.png"
    if not path.exists():
        drawn._save(SHAPES[1].image, path)
    return path


def _source_with_link(base: Path, writer: str, linked: str, target: str) -> Path:
    outside = _outside(base)
    root = WRITERS[writer](base / "source", SHAPES)
    link = root / linked
    if link.is_dir():
        shutil.rmtree(link)
    elif link.exists():
        link.unlink()
    link.symlink_to(outside / target)
    return root


@pytest.mark.parametrize(("writer", "task", "linked", "target", "outcome"), LINKS)
def test_it_never_reads_through_a_link_in_the_label_check(import_root, writer, task, linked, target, outcome):
    root = _source_with_link(import_root, writer, linked, target)
    if outcome == "refused":
        with pytest.raises(LabelError) as refused:
            label_check(root, task=task)
        assert str(refused.value) == f"{linked}: symbolic link not followed"
        return
    check = label_check(root, task=task)
    # A linked image (or mask) leaves its image out; a linked label file leaves it without labels.
    assert check["images"] == len(SHAPES) - (1 if linked.endswith(".png") else 0)
    problems = [(p["file"], p["kind"], p["message"]) for p in check["report"]["problems"]]
    assert (linked, "link", "symbolic link not followed") in problems
    text = json.dumps(check)
    assert SECRET not in text and "outside" not in text


def _import(*args) -> tuple[Dataset, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_dataset", *args, "--owner", "alice", "--sync", stdout=out, stderr=err)
    return Dataset.objects.get(pk=int(out.getvalue().splitlines()[0])), err.getvalue()


@pytest.mark.django_db
def test_it_builds_without_linked_files_and_names_them_in_the_skipped_report(owner, import_root):
    root = _source_with_link(import_root, "kitti", f"images/{FIRST}.png", "other.png")
    (root / "labels" / f"{SHAPES[1].name}.txt").unlink()
    (root / "labels" / f"{SHAPES[1].name}.txt").symlink_to(import_root / "outside" / "secret.txt")
    dataset, err = _import(str(root), "--image-size", "24x18", "--val-percent", "0")
    assert dataset.status == "ready", dataset.error
    skipped = {s["path"]: s["reason"] for s in json.loads((dataset.path / "skipped.json").read_text())}
    assert skipped == {
        f"images/{FIRST}.png": "symbolic link not followed",
        f"labels/{FIRST}.txt": f"no image {FIRST}.* in images/",  # its image was the link
        f"labels/{SHAPES[1].name}.txt": "symbolic link not followed",
    }
    assert dataset.splits["train"]["count"] == len(SHAPES) - 1
    assert SECRET not in err + (dataset.path / "label_report.json").read_text()


@pytest.mark.django_db
def test_it_refuses_a_linked_class_file_through_the_form_and_the_build_alone(owner, import_root):
    root = _source_with_link(import_root, "yolo", "classes.txt", "secret.txt")
    with pytest.raises(CommandError, match=r"classes.txt: symbolic link not followed"):
        _import(str(root), "--image-size", "24x18")
    # The build reads the source again (a link may be made after the form's check): refused alike.
    dataset = services.dataset_create(
        owner=owner,
        name="linked",
        kind="folder",
        source={"path": str(root), "format": "auto"},
        options={"task": "detection", "image_width": 24, "image_height": 18, "val_percent": 0},
        queue=False,
    )
    building.dataset_build(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    assert dataset.status == "failed"
    assert "classes.txt: symbolic link not followed" in dataset.error and SECRET not in dataset.error


def test_it_refuses_an_image_swapped_for_a_link_after_the_check_at_the_build_worker(tmp_path):
    root = drawn.write_kitti(tmp_path / "kitti", SHAPES[:1])
    image = root / "images" / f"{FIRST}.png"
    outside = drawn_image(tmp_path)
    image.unlink()
    image.symlink_to(outside)  # as if swapped between the label check and the build
    with pytest.raises(ImageRefused, match=r"^symbolic link not followed$"):
        prepare_annotated(str(image), [], width=8, height=8, channels=3, resize_mode="squash", seed=0)
    (root / "images").rename(root / "real")
    (root / "images").symlink_to(root / "real")  # a folder on the way, not the file itself
    with pytest.raises(ImageRefused, match=r"symbolic link not followed"):
        prepare_annotated(str(image), [], width=8, height=8, channels=3, resize_mode="squash", seed=0)


def test_it_does_not_look_for_coco_images_outside_the_source(tmp_path):
    # A JSON at the top once had its images looked for in ../images: the folder above the source.
    root = drawn.write_coco(tmp_path / "source", SHAPES)
    (root / "annotations" / "instances_default.json").rename(root / "instances_default.json")
    (root / "annotations").rmdir()
    (root / "images").rename(tmp_path / "images")
    check = label_check(root, task="detection")
    assert check["images"] == 0
    assert {p["kind"] for p in check["report"]["problems"]} == {"missing_image"}


# --------------------------------------------------------------------------- one door


# Calls that open or list a path. A reader opens through datasets.labels.files (open_file,
# list_files) and common's read_text / image_size built on them; Image.open is allowed on the
# handle open_file gave, which this scan recognises by its name, `handle`.
OPENING_METHODS = {"open", "read_text", "read_bytes", "walk", "scandir", "listdir", "iterdir"}


def _doors(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id != "open":  # read_text(path, root) is common's, by the helper
            continue
        if isinstance(func, ast.Attribute) and func.attr not in OPENING_METHODS:
            continue
        receiver = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
        argument = ast.unparse(node.args[0]) if node.args else ""
        if receiver == "Image" and argument == "handle":
            continue
        found.append(f"{path.name}:{node.lineno} {ast.unparse(func)}({argument})")
    return found


def test_it_opens_and_lists_source_files_only_through_the_one_helper():
    folder = Path(__file__).resolve().parents[3] / "datasets" / "labels"
    doors = [door for path in sorted(folder.glob("*.py")) if path.name != "files.py" for door in _doors(path)]
    assert doors == []
    # The helper itself opens only with O_NOFOLLOW, from descriptors.
    helper = (folder / "files.py").read_text()
    assert "O_NOFOLLOW" in helper and os.open.__name__ in helper
