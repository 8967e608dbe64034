"""Pascal VOC XML (datasets/labels/voc.py): parsed incrementally, a DOCTYPE and entities refused
before anything is expanded, and every box number finite and in range, named by object and field."""

from __future__ import annotations

import time

import pytest

from datasets.labels import read_labels
from tests.support import shapes as drawn

SHAPES = drawn.make_shapes(1)
NAME = SHAPES[0].name
XML = f"Annotations/{NAME}.xml"

LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10 if i else "&lol;" * 10}">' for i in range(9))
    + "]>"
)


def _with(root, xml: str):
    (root / XML).write_text(xml)
    return read_labels(root, "voc")


@pytest.mark.parametrize(
    "prolog",
    [LAUGHS, '<!DOCTYPE annotation [<!ENTITY cls "square">]>', '<!DOCTYPE annotation SYSTEM "file:///etc/passwd">'],
    ids=["billion-laughs", "one-entity", "external-dtd"],
)
def test_it_refuses_a_doctype_before_expanding_anything(tmp_path, prolog):
    root = drawn.write_voc(tmp_path / "voc", SHAPES)
    body = f"<annotation><filename>{NAME}.png</filename><object><name>&cls;</name></object></annotation>"
    started = time.process_time()
    source = _with(root, prolog + body)
    assert time.process_time() - started < 2
    assert [(p.file, p.kind, p.message) for p in source.report.problems] == [
        (XML, "malformed", "a DOCTYPE (DTD) is not allowed in a VOC annotation")
    ]
    assert source.images[0].labelled is False  # left without labels, not with an expanded name


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("inf", "xmin must be a finite number, not inf"),
        ("nan", "xmin must be a finite number, not nan"),
        ("1e999", "xmin must be a finite number, not inf"),
        ("9" * 400, "xmin must be a number, not '99999"),
        ("-2e6", "xmin must be a number from -1e+06 to 1e+06"),
        ("", "xmin must be a number, not ''"),
    ],
    ids=["inf", "nan", "overflow", "400-digits", "out-of-range", "empty"],
)
def test_it_names_a_box_number_that_is_not_finite_or_in_range_by_object_and_field(tmp_path, value, message):
    root = drawn.write_voc(tmp_path / "voc", SHAPES)
    xml = (
        f"<annotation><filename>{NAME}.png</filename><object><name>square</name><bndbox><xmin>{value}</xmin>"
        "<ymin>1</ymin><xmax>5</xmax><ymax>5</ymax></bndbox></object></annotation>"
    )
    source = _with(root, xml)
    problems = [(p.file, p.line, p.kind, p.message) for p in source.report.problems]
    assert len(problems) == 1 and problems[0][:3] == (f"{XML} object 1", None, "malformed"), problems
    assert message in problems[0][3]
    assert source.images[0].boxes == []


def test_it_still_reads_what_a_voc_file_holds_and_names_bad_xml_by_line(tmp_path):
    root = drawn.write_voc(tmp_path / "voc", SHAPES)
    source = read_labels(root, "voc")
    assert source.report.problems == [] and len(source.images[0].boxes) == len(SHAPES[0].boxes)
    source = _with(root, "<annotation>\n<object><name>square</name>\n</annotation>")
    assert [(p.file, p.line, p.kind) for p in source.report.problems] == [(XML, 3, "malformed")]
