"""The one grammar of weights references (workbench/weights/references.py), row by row: what each
good reference means, and the one-line message of each bad one, naming the field."""

from __future__ import annotations

import pickle

import pytest

from workbench.core.errors import RequestError
from workbench.weights.references import REFUSED, Reference, WeightsReferenceError, reference_parse

GOOD = [
    ("weights:1", Reference("weights", 1)),
    ("upload:42", Reference("upload", 42)),
    ("run:7", Reference("run", 7, "best")),
    ("run:7:best", Reference("run", 7, "best")),
    ("run:7:last", Reference("run", 7, "last")),
    ("run:7:1200", Reference("run", 7, 1200)),
    ("run:7:0", Reference("run", 7, 0)),
    ("upload:999999999999999999", Reference("upload", 999999999999999999)),
]

# Every bad one reads the same: a path, a typo and another user's row must not be told apart.
BAD = [
    "/etc/passwd",
    "../runs/1/checkpoints/best.pt",
    "pretrained/user1/upload-1.pt",
    "upload:0",  # ids start at 1
    "upload:01",
    "upload:-1",
    "upload:1\n",  # no trailing newline (fullmatch, not match)
    " upload:1",
    "UPLOAD:1",
    "upload:",
    "upload:1:last",  # only a run has checkpoints to choose from
    "weights:1:best",
    "run:7:middle",
    "run:7:-3",
    "run:7:1e3",
    "run:7:last:1",
    "run:1234567890123456789",  # 19 digits: past any id
    "run:7:1234567890123",  # 13 digits: past any step
    "file:1",
    "",
    5,
    None,
    ["upload:1"],
    {"path": "/etc/passwd"},
]


@pytest.mark.parametrize(("value", "meaning"), GOOD)
def test_it_parses_each_good_reference(value, meaning):
    assert reference_parse(value) == meaning
    assert reference_parse(str(meaning)) == meaning  # written back as a config stores it


@pytest.mark.parametrize("value", BAD)
def test_it_refuses_each_bad_reference_in_one_line_naming_the_field(value):
    with pytest.raises(WeightsReferenceError) as refused:
        reference_parse(value)
    assert isinstance(refused.value, RequestError)  # the one error the form, API and CLI adapt
    assert refused.value.errors == [("config.pretrained", REFUSED)]
    assert str(refused.value) == f"config: pretrained: {REFUSED}" and "\n" not in str(refused.value)


def test_it_makes_a_refusal_again_from_its_pairs_and_through_pickle():
    refused = WeightsReferenceError()
    # The API re-keys a refusal's pairs (type(error).of); a Celery result pickles it.
    for again in (type(refused).of(refused.errors), pickle.loads(pickle.dumps(refused))):
        assert isinstance(again, RequestError) and again.errors == refused.errors == [("config.pretrained", REFUSED)]
