"""The data doctor's confident learning (datasets/doctor/confident.py) against cleanlab's own
find_label_issues on the same out-of-sample probabilities: nearly the same suspects, the same top
of the ranking, and the flipped labels found as well as it finds them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from datasets.doctor.confident import find_suspects


def noisy_predictions(seed: int, images: int = 800, classes: int = 5, flips: int = 40):
    """A model's probabilities (right more often than not) and labels with `flips` of them wrong."""
    rng = np.random.default_rng(seed)
    true = rng.integers(0, classes, images)
    logits = rng.normal(0, 1, (images, classes))
    logits[np.arange(images), true] += rng.uniform(0.5, 4, images)
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    flipped = rng.choice(images, flips, replace=False)
    given = true.copy()
    given[flipped] = (true[flipped] + rng.integers(1, classes, flips)) % classes
    return given, probabilities, flipped


@pytest.mark.parametrize("seed", range(4))
def test_it_finds_the_suspects_cleanlab_finds_and_ranks_them_alike(seed):
    from cleanlab.filter import find_label_issues  # AGPL-3.0: a test-only reference

    given, probabilities, flipped = noisy_predictions(seed)
    ours = find_suspects(given, probabilities)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = find_label_issues(given, probabilities)
        ranked = find_label_issues(given, probabilities, return_indices_ranked_by="self_confidence")
    a, b = set(np.flatnonzero(ours.flagged)), set(np.flatnonzero(theirs))
    assert len(a & b) / len(a | b) >= 0.95, (len(a), len(b), len(a & b))
    assert list(ours.order[:20]) == list(ranked[:20])
    found = len(set(ours.order[: len(flipped)]) & set(flipped)) / len(flipped)
    assert found == len(set(ranked[: len(flipped)]) & set(flipped)) / len(flipped) and found >= 0.5


def test_it_doubts_no_label_the_model_agrees_with_and_ranks_every_image():
    given = np.array([0, 0, 0, 1, 1, 1])
    probabilities = np.array([[0.9, 0.1], [0.8, 0.2], [0.1, 0.9], [0.2, 0.8], [0.3, 0.7], [0.6, 0.4]])
    suspects = find_suspects(given, probabilities)
    assert np.flatnonzero(suspects.flagged).tolist() == [2, 5]
    assert suspects.order.tolist()[:2] == [2, 5] and sorted(suspects.order.tolist()) == list(range(6))
    assert suspects.suggested.tolist() == [0, 0, 1, 1, 1, 0]
    with pytest.raises(ValueError, match="labels must be class indexes below 2"):
        find_suspects([0, 2], probabilities[:2])
