"""One class-name rule (datasets.names.class_name_problem) wherever a class name comes in: every
line break str.splitlines() knows, every other control character and names past the length
limit, through COCO, VOC, YOLO (data.yaml and classes.txt), masks' labels.txt and the class table."""

from __future__ import annotations

import json
import re

import pytest
from django.core.exceptions import ValidationError

from datasets.labels import read_labels
from datasets.labels.classes import class_table
from datasets.labels.common import LabelError
from datasets.names import CONTROL_CHARACTER, MAX_CLASS_NAME, class_name_problem, escaped
from datasets.validators import parse_class_map
from tests.support import shapes as drawn

SHAPES = drawn.make_shapes(2)
# Every separator of str.splitlines(), then other control characters: each made labels.txt one
# line longer than the classes (7 lines for 6 classes) or hid text in a page.
BREAKS = ["\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\t", "\x00", "\x1b"]
LONG = "x" * (MAX_CLASS_NAME + 1)
BAD_NAMES = [f"car{c}bus" for c in BREAKS] + [LONG]


def _reason(name: str) -> str:
    if name == LONG:
        return f"{MAX_CLASS_NAME + 1} characters long, more than the {MAX_CLASS_NAME}"
    return CONTROL_CHARACTER


def test_it_refuses_every_character_that_splits_a_line_and_keeps_real_names():
    for code in range(0x10000):  # every separator splitlines() knows lies below U+2030
        name = f"a{chr(code)}b"
        if len(name.splitlines()) > 1:
            assert class_name_problem(name) == CONTROL_CHARACTER, hex(code)
    for name in ("person", "traffic light", "Straßenbahn", "猫", "a\u200db", "x" * MAX_CLASS_NAME):
        assert class_name_problem(name) is None
    assert class_name_problem(" ") == "class name is empty"
    assert class_name_problem("a\ud800") is not None  # a lone surrogate from a JSON escape


@pytest.mark.parametrize("bad", BAD_NAMES, ids=lambda n: escaped(n)[:12])
def test_it_leaves_out_a_coco_category_or_voc_object_with_a_bad_name_naming_it(tmp_path, bad):
    coco = drawn.write_coco(tmp_path / "coco", SHAPES)
    path = coco / "annotations" / "instances_default.json"
    data = json.loads(path.read_text())
    data["categories"][0]["name"] = bad
    path.write_text(json.dumps(data))
    source = read_labels(coco, "coco")
    assert bad not in source.classes and source.classes == list(drawn.CLASSES[1:])
    problem = next(p for p in source.report.problems if p.kind == "class_name")
    assert problem.file == "annotations/instances_default.json category 1" and _reason(bad) in problem.message

    voc = drawn.write_voc(tmp_path / "voc", SHAPES)
    xml = voc / "Annotations" / f"{SHAPES[0].name}.xml"
    first = SHAPES[0].boxes[0][0]
    escaped_xml = "".join(f"&#{ord(c)};" if ord(c) < 32 or c in "\x85\u2028\u2029" else c for c in bad)
    xml.write_text(xml.read_text().replace(f"<name>{first}</name>", f"<name>{escaped_xml}</name>", 1))
    source = read_labels(voc, "voc")
    if bad[3] not in "\t\n\r\x85\u2028\u2029" and bad != LONG:
        # XML 1.0 cannot hold the other control characters even as references: the file is malformed
        assert [(p.kind, p.line) for p in source.report.problems] == [("malformed", 1)]
        return
    assert all(name == name.strip() and class_name_problem(name) is None for name in source.classes)
    problem = next(p for p in source.report.problems if p.kind == "class_name")
    assert problem.file == f"Annotations/{SHAPES[0].name}.xml object 1" and _reason(bad) in problem.message


@pytest.mark.parametrize("bad", BAD_NAMES, ids=lambda n: escaped(n)[:12])
def test_it_refuses_a_class_list_with_a_bad_name_naming_file_and_entry(tmp_path, bad):
    yolo = drawn.write_yolo(tmp_path / "yolo", SHAPES)
    (yolo / "classes.txt").unlink()
    quoted = json.dumps(bad)  # YAML's double-quoted escapes are JSON's
    (yolo / "data.yaml").write_text(f"names: [{drawn.CLASSES[0]}, {quoted}]\n")
    with pytest.raises(LabelError, match=rf"^data.yaml: class 2 \(.*\): .*{re.escape(_reason(bad))}"):
        read_labels(yolo, "yolo")
    if "\n" not in bad:  # a line break in classes.txt is simply the next line
        (yolo / "data.yaml").unlink()
        (yolo / "classes.txt").write_bytes(f"{drawn.CLASSES[0]}\n{bad}\n".encode())
        with pytest.raises(LabelError, match=rf"^classes.txt: class 2 \(.*\): .*{re.escape(_reason(bad))}"):
            read_labels(yolo, "yolo")
        masks = drawn.write_index_masks(tmp_path / "masks", SHAPES)
        (masks / "labels.txt").write_bytes(f"background\n{bad}\ndisc\n".encode())
        with pytest.raises(LabelError, match=rf"^labels.txt: class 2 \(.*\): .*{re.escape(_reason(bad))}"):
            read_labels(masks, "index_masks")


@pytest.mark.parametrize("bad", BAD_NAMES, ids=lambda n: escaped(n)[:12])
def test_it_refuses_a_class_table_target_with_a_bad_name_in_the_form_and_the_table(bad):
    with pytest.raises(ValidationError) as refused:
        parse_class_map(json.dumps({"square": bad}))
    assert _reason(bad) in " ".join(refused.value.messages)
    reason = re.escape(_reason(bad))
    with pytest.raises(LabelError, match=rf"^class table: the new name of 'square' is refused: .*{reason}"):
        class_table(["square", "disc"], {"square": bad})
