"""KITTI's numbers (datasets/labels/kitti.py) go through the one bounded parser: a box column that
is not a finite number in range is reported by file, line and column name (Infinity, NaN and
400-digit numbers passed float() and reached the box checks or overflowed later)."""

from __future__ import annotations

import pytest

from datasets.labels import read_labels
from tests.support import shapes as drawn

SHAPES = drawn.make_shapes(1)
LABELS = f"labels/{SHAPES[0].name}.txt"


@pytest.mark.parametrize(
    ("right", "message"),
    [
        ("inf", "right must be a finite number, not inf"),
        ("NaN", "right must be a finite number, not nan"),
        ("1e999", "right must be a finite number, not inf"),
        ("9" * 400, "right must be a number, not '99999"),
        ("5e6", "right must be a number from -1e+06 to 1e+06, not '5e6'"),
    ],
    ids=["inf", "nan", "overflow", "400-digits", "out-of-range"],
)
def test_it_names_a_box_number_that_is_not_finite_or_in_range_by_line_and_column(tmp_path, right, message):
    root = drawn.write_kitti(tmp_path / "kitti", SHAPES)
    good = "square 0.00 0 0.00 1.00 1.00 9.00 9.00 1.5 1.6 3.9 0.0 1.0 10.0 0.0"
    bad = f"square 0.00 0 0.00 1.00 1.00 {right} 9.00 1.5 1.6 3.9 0.0 1.0 10.0 0.0"
    (root / LABELS).write_text(f"{good}\n{bad}\n")
    source = read_labels(root, "kitti")
    problems = [(p.file, p.line, p.kind, p.message) for p in source.report.problems]
    assert len(problems) == 1 and problems[0][:3] == (LABELS, 2, "malformed"), problems
    assert problems[0][3].startswith(message)
    assert len(source.images[0].boxes) == 1


def test_it_reads_a_label_file_line_by_line_and_leaves_out_the_image_of_one_not_utf8(tmp_path):
    root = drawn.write_kitti(tmp_path / "kitti", SHAPES)
    good = b"square 0.00 0 0.00 1.00 1.00 9.00 9.00 1.5 1.6 3.9 0.0 1.0 10.0 0.0\n"
    (root / LABELS).write_bytes(good * 3 + b"\xff\xfe broken\n")
    source = read_labels(root, "kitti")
    assert [(p.file, p.kind) for p in source.report.problems] == [(LABELS, "bad_file")]
    assert "not UTF-8" in source.report.problems[0].message
    assert source.images == []  # not kept as an image without objects
