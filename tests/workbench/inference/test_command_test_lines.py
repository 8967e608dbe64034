"""The `infer test` command's text of a test's measures: each task's headline and class table in
the words of its row (workbench/core/task_table.py TestReport), a segmenter's notes and a
classifier's confusion matrix (issue 32: the command no longer asks which task it holds)."""

from __future__ import annotations

# The module, not the function: pytest would collect a test_lines imported here as a test.
from workbench.inference.management import common


def test_it_prints_a_detectors_map_and_each_classs_ap():
    result = {"task": "detection", "count": 4, "map": 0.5, "map_50": 0.75, "map_75": 0.25, "mar_100": 0.6,
              "per_class": [{"label": "square", "instances": 3, "ap": 0.4, "ap50": 0.8, "ar100": 0.5},
                            {"label": "disc", "instances": 1, "ap": 0.6, "ap50": 0.7, "ar100": 0.7}]}  # fmt: skip
    assert common.test_lines(result) == [
        "4 images: mAP 50.00%, mAP50 75.00%, mAP75 25.00%, mAR@100 60.00%",
        "class   instances      AP    AP50  AR@100",
        "square          3  40.00%  80.00%  50.00%",
        "disc            1  60.00%  70.00%  70.00%",
    ]


def test_it_prints_a_segmenters_miou_each_classs_iou_and_its_notes():
    result = {"task": "segmentation", "count": 2, "miou": 0.5, "pixel_accuracy": 0.9, "dice": 0.6,
              "per_class": [{"label": "bg", "pixels": 100, "iou": 0.9, "dice": 0.95, "accuracy": 0.97},
                            {"label": "disc", "pixels": 20, "iou": 0.1, "dice": 0.2, "accuracy": 0.3}],
              "notes": ["a note"]}  # fmt: skip
    assert common.test_lines(result) == [
        "2 images: mIoU 50.00%, pixel accuracy 90.00%, Dice 60.00%",
        "class  pixels     IoU    Dice  accuracy",
        "bg        100  90.00%  95.00%    97.00%",
        "disc       20  10.00%  20.00%    30.00%",
        "a note",
    ]


def test_it_prints_a_classifiers_top_k_each_classs_f1_and_the_confusion():
    # A classifier's result names no task (made before tasks were recorded): the classify row.
    result = {"count": 3, "top1": 2 / 3, "top5": 1.0, "top_k": 3, "labels": ["a", "b"], "confusion": [[1, 1], [0, 1]],
              "per_class": [{"label": "a", "support": 2, "precision": 1.0, "recall": 0.5, "f1": 2 / 3},
                            {"label": "b", "support": 1, "precision": 0.5, "recall": 1.0, "f1": 2 / 3}]}  # fmt: skip
    assert common.test_lines(result) == [
        "3 images: top-1 66.67%, top-3 100.00%",
        "class  images  precision   recall      F1",
        "a           2    100.00%   50.00%  66.67%",
        "b           1     50.00%  100.00%  66.67%",
        "confusion (rows: true class, columns: predicted)",
        "   a  b",
        "a  1  1",
        "b  0  1",
    ]
