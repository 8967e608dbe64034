"""Confident learning (Northcutt, Jiang and Chuang, "Confident Learning: Estimating Uncertainty in
Dataset Labels", JAIR 2021): which given labels out-of-sample predictions doubt, and how sure.

The workbench owns this small core (cleanlab, which implements it, is AGPL-3.0; the tests compare
this ranking with its `find_label_issues` on the same probabilities, docs/design.md). Numpy only.

1. A class's threshold is the mean probability the model gives it over the images labelled so.
2. The confident joint counts, for each given label i, the images whose most probable class
   among those above their thresholds is j.
3. Calibrated so that each row sums to the images given that label, its off-diagonal (i, j)
   estimates how many images labelled i are really j.
4. Prune by noise rate: of the images labelled i, the (i, j) estimate of them with the largest
   margin p_j - p_i are suspects; one the model predicts as its given label is not.
5. Suspects are ranked by self-confidence (the probability of the given label), lowest first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Suspects:
    """`order`: every image, the suspects first (least self-confident first), then the rest by the
    same score; `flagged`: a mask of the suspects; `suggested`: each image's most probable class;
    `self_confidence`: each image's probability of its given label; `joint`: the calibrated
    confident joint (given label x true label)."""

    order: np.ndarray
    flagged: np.ndarray
    suggested: np.ndarray
    self_confidence: np.ndarray
    joint: np.ndarray

    @property
    def count(self) -> int:
        return int(self.flagged.sum())


def _check(labels: np.ndarray, probabilities: np.ndarray) -> None:
    if probabilities.ndim != 2 or len(labels) != len(probabilities):
        raise ValueError(f"{len(labels)} labels for probabilities of shape {probabilities.shape}")
    if len(labels) and (labels.min() < 0 or labels.max() >= probabilities.shape[1]):
        raise ValueError(f"labels must be class indexes below {probabilities.shape[1]}")


def confident_joint(labels: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """The calibrated confident joint: counts of (given label, confidently predicted class)."""
    classes = probabilities.shape[1]
    given = np.bincount(labels, minlength=classes)
    thresholds = np.array(
        [probabilities[labels == k, k].mean() if given[k] else 1.0 for k in range(classes)], dtype=np.float64
    )
    above = probabilities >= thresholds - 1e-6  # float32 probabilities against a float64 mean
    confident = np.where(above, probabilities, -1.0).argmax(axis=1)
    counted = above.any(axis=1)
    joint = np.zeros((classes, classes), dtype=np.float64)
    np.add.at(joint, (labels[counted], confident[counted]), 1.0)
    # Each row to the images given that label (the counted ones stand for all of them).
    rows = joint.sum(axis=1, keepdims=True)
    calibrated = np.divide(joint * given[:, None], rows, out=np.zeros_like(joint), where=rows > 0)
    return _round_keeping_rows(calibrated, given)


def _round_keeping_rows(matrix: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Whole counts whose rows still sum to `totals` (largest remainders round up)."""
    floor = np.floor(matrix).astype(np.int64)
    for row in range(len(matrix)):
        short = int(totals[row]) - int(floor[row].sum())
        if short > 0 and matrix[row].sum() > 0:
            remainders = matrix[row] - floor[row]
            floor[row, np.argsort(-remainders, kind="stable")[:short]] += 1
    return floor


def find_suspects(labels, probabilities) -> Suspects:
    """Confident learning over out-of-sample `probabilities` (images x classes) of images with
    the given `labels` (class indexes)."""
    labels = np.asarray(labels, dtype=np.int64)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    _check(labels, probabilities)
    joint = confident_joint(labels, probabilities)
    flagged = np.zeros(len(labels), dtype=bool)
    for given in range(joint.shape[0]):
        members = np.flatnonzero(labels == given)
        for true in range(joint.shape[1]):
            count = int(joint[given, true])
            if true == given or count <= 0 or not len(members):
                continue
            margin = probabilities[members, true] - probabilities[members, given]
            flagged[members[np.argsort(-margin, kind="stable")[:count]]] = True
    suggested = probabilities.argmax(axis=1)
    flagged &= suggested != labels  # the model agrees with the label: no reason to doubt it
    self_confidence = probabilities[np.arange(len(labels)), labels]
    # Suspects first, each group least self-confident first; ties by index (a stable order).
    order = np.lexsort((np.arange(len(labels)), self_confidence, ~flagged))
    return Suspects(order, flagged, suggested, self_confidence, joint)
