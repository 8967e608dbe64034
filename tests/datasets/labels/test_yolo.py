"""A YOLO data.yaml is read without expanding anything: aliases, anchors and tags are refused at
the parser's events, names must be text, the file has a size cap; each refusal names data.yaml."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from datasets.labels import read_labels
from datasets.labels.common import LabelError
from datasets.labels.limits import FILE_LIMITS
from tests.support import shapes as drawn

SHAPES = drawn.make_shapes(2)
MAX_DATA_YAML_BYTES = FILE_LIMITS["data_yaml"].max_bytes


def _laughs(levels: int, width: int = 10) -> str:
    """The billion laughs: each level a list of `width` aliases of the one below."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * width)}]")
    lines.append(f"names: [*a{levels - 1}, person]")
    return "\n".join(lines) + "\n"


# (what the data.yaml holds, the refusal's words after "data.yaml: ").
REFUSED = [
    ("names: [person, &x car, *x]\n", r"line 1: anchors \(&x\) are not allowed"),
    ("x: &lol [a, b]\nnames: *lol\n", r"line 1: anchors \(&lol\) are not allowed"),
    ("names: [person, !!binary aGVsbG8=]\n", r"line 1: tags \(tag:yaml.org,2002:binary\) are not allowed"),
    ("names: !!python/tuple [a, b]\n", r"line 1: tags \(tag:yaml.org,2002:python/tuple\) are not allowed"),
    ("names: [person, [a, b]]\n", r"class 2 \(list\): class name must be text, not list"),
    ("names: {0: person, 1: {x: 1}}\n", r"class 2 \(dict\): class name must be text, not dict"),
    ("names: [person, true]\n", r"class 2 \(bool\): class name must be text, not bool"),
    ("names: [person, 2.5]\n", r"class 2 \(float\): class name must be text, not float"),
    ("names: " + "[" * 5000 + "]" * 5000 + "\n", r"nested too deeply|not valid YAML"),
    # Values the loader cannot build raise ValueError, not a YAMLError: the child died on them.
    ("names: [person, " + "9" * 5000 + "]\n", r"a value cannot be read \(Exceeds the limit"),
    ("names: {0: person, 1: " + "9" * 5000 + "}\n", r"a value cannot be read"),
    ("names: [person, 2001-13-45]\n", r"a value cannot be read \(month must be in 1..12\)"),
]


@pytest.mark.parametrize(("text", "refusal"), REFUSED)
def test_it_refuses_aliases_tags_and_names_that_are_not_text_naming_data_yaml(tmp_path, text, refusal):
    root = drawn.write_yolo(tmp_path / "yolo", SHAPES)
    (root / "classes.txt").unlink()
    (root / "data.yaml").write_text(text)
    with pytest.raises(LabelError, match=rf"^data.yaml: {refusal}"):
        read_labels(root, "yolo")


def test_it_refuses_the_billion_laughs_fast_and_in_bounded_memory(tmp_path):
    root = drawn.write_yolo(tmp_path / "yolo", SHAPES)
    (root / "classes.txt").unlink()
    text = _laughs(6)  # a million "lol"s from 500 bytes; the attack's nine levels are a billion
    assert len(text) < 600
    (root / "data.yaml").write_text(text)
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(LabelError, match=r"^data.yaml: line 1: anchors \(&a0\) are not allowed"):
            read_labels(root, "yolo")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # expanded, the names' text alone is 7 MB
    assert time.monotonic() - started < 10  # generous for a busy machine; refused at the first anchor


def test_it_refuses_a_data_yaml_over_the_size_cap_without_parsing_it(tmp_path):
    root = drawn.write_yolo(tmp_path / "yolo", SHAPES)
    (root / "classes.txt").unlink()
    (root / "data.yaml").write_text("names: [square, disc]\n#" + "x" * MAX_DATA_YAML_BYTES + "\n")
    with pytest.raises(
        LabelError,
        match=rf"^data.yaml: \d+ bytes, more than the {MAX_DATA_YAML_BYTES} bytes \(1 MiB\) a data.yaml may have",
    ):
        read_labels(root, "yolo")


def test_it_still_reads_plain_names_as_a_list_a_mapping_or_digits(tmp_path):
    root = drawn.write_yolo(tmp_path / "yolo", SHAPES)
    (root / "classes.txt").unlink()
    for text, names in (
        ("names: [square, disc]\n", ["square", "disc"]),
        ("names:\n  0: square\n  1: 'disc'\n", ["square", "disc"]),
        ("nc: 2\nnames: [0, 1]\n", ["0", "1"]),
    ):
        (root / "data.yaml").write_text(text)
        assert read_labels(root, "yolo").classes == names


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("0 inf 0.5 0.2 0.2", "x_center must be a finite number, not inf"),
        ("0 0.5 nan 0.2 0.2", "y_center must be a finite number, not nan"),
        ("0 0.5 0.5 1e999 0.2", "width must be a finite number, not inf"),
        (f"0 0.5 0.5 0.2 {'9' * 400}", "height must be a number, not '99999"),
        (f"{'9' * 400} 0.5 0.5 0.2 0.2", "class must be a whole number, not '99999"),
    ],
    ids=["inf", "nan", "overflow", "400-digits", "400-digit-class"],
)
def test_it_names_a_yolo_number_that_is_not_finite_or_in_range_by_line_and_field(tmp_path, line, message):
    root = drawn.write_yolo(tmp_path / "yolo", SHAPES)
    name = f"labels/{SHAPES[0].name}.txt"
    (root / name).write_text(f"0 0.5 0.5 0.2 0.2\n{line}\n")
    source = read_labels(root, "yolo")
    problems = [(p.file, p.line, p.kind, p.message) for p in source.report.problems]
    assert len(problems) == 1 and problems[0][:3] == (name, 2, "malformed"), problems
    assert message in problems[0][3]
