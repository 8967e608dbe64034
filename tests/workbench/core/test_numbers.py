"""The one parser of users' numbers (workbench/core/numbers.py): finite, bounded, named."""

from __future__ import annotations

import math

import pytest

from workbench.core.numbers import MAX_ID, NumberError, bounded_number


@pytest.mark.parametrize(
    "value, expected",
    [(3, 3.0), (2.5, 2.5), (" 7.25 ", 7.25), ("1e1", 10.0)],
)  # fmt: skip
def test_it_reads_numbers_and_their_text(value, expected):
    assert bounded_number(value, field="size", low=0, high=10) == expected


@pytest.mark.parametrize(
    "value, message",
    [(10**400, "more than 40 digits"), ("9" * 400, "size must be a number"), (math.inf, "finite"),
     (math.nan, "finite"), ("1e999", "finite"), ("NaN", "finite"), (True, "must be a number"),
     (None, "must be a number"), ([1], "must be a number"), (-1, "from 0 to 10"), (11, "from 0 to 10")],
)  # fmt: skip
def test_it_refuses_what_is_no_finite_number_in_range_naming_the_field(value, message):
    with pytest.raises(NumberError, match="size") as caught:
        bounded_number(value, field="size", low=0, high=10)
    assert message in str(caught.value) and len(str(caught.value)) < 120


def test_it_names_a_list_or_an_object_instead_of_printing_it():
    with pytest.raises(NumberError) as caught:
        bounded_number([7] * 1_000_000, field="size", low=0, high=10)
    assert str(caught.value) == "size must be a number, not a list"


def test_it_reads_ids_as_whole_numbers_within_the_database_column():
    assert bounded_number("12", field="runs", low=1, high=MAX_ID, integer=True) == 12
    with pytest.raises(NumberError, match="runs must be a whole number from 1 to"):
        bounded_number(MAX_ID + 1, field="runs", low=1, high=MAX_ID, integer=True)
    with pytest.raises(NumberError, match="whole number"):
        bounded_number(1.5, field="runs", low=1, high=MAX_ID, integer=True)
