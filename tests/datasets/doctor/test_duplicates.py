"""Exact and near duplicates (datasets/doctor/duplicates.py) and a dataset's report of them
(report.py): copies found whatever was done to them, distinct pictures never paired, leaks named."""

from __future__ import annotations

import pytest

from datasets.doctor import duplicates, report
from datasets.doctor.duplicates import find_pairs, fingerprint
from tests.datasets.doctor.conftest import distinct_images, mirrored_jpeg, resized_cropped


def _pairs(images) -> set[tuple[int, int, str]]:
    return {(pair.first, pair.second, pair.kind) for pair in find_pairs(fingerprint(images))}


def test_it_finds_exact_mirrored_reencoded_resized_and_cropped_copies_and_nothing_else():
    images = distinct_images(80)
    images += [images[5].copy(), mirrored_jpeg(images[11]), resized_cropped(images[40])]
    assert _pairs(images) == {(5, 80, "exact"), (11, 81, "near"), (40, 82, "near")}


def test_it_pairs_images_in_different_blocks_of_the_distance_matrix(monkeypatch):
    images = distinct_images(40)
    images += [mirrored_jpeg(images[2]), resized_cropped(images[39])]
    whole = _pairs(images)
    monkeypatch.setattr(duplicates, "BLOCK", 7)
    assert _pairs(images) == whole == {(2, 40, "near"), (39, 41, "near")}


@pytest.mark.django_db
def test_it_reports_a_leak_between_splits_first_and_counts_per_pair_of_splits(leaky_dataset):
    found = report.scan(leaky_dataset.path)
    assert (found["images"], found["pairs_total"], found["leaks"], found["exact"]) == (42, 2, 1, 1)
    assert found["counts"] == {"train-train": 1, "train-val": 1}
    leak, copy = found["pairs"]
    assert (leak["a"]["split"], leak["a"]["index"], leak["b"]["split"], leak["b"]["index"]) == ("train", 7, "val", 10)
    assert (copy["kind"], copy["a"]["index"], copy["b"]["index"]) == ("exact", 3, 30)
    assert leak["a"]["key"] == "00000007_1" and leak["a"]["label"] == 1


@pytest.mark.django_db
def test_it_declines_a_dataset_too_large_to_compare_every_pair_with_the_reason(leaky_dataset, monkeypatch):
    monkeypatch.setattr(report, "MAX_IMAGES", 41)
    assert report.scan(leaky_dataset.path) == {
        "error": "42 images: the check compares every pair, and is offered up to 41"
    }
