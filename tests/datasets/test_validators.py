"""Numbers a dataset is given go through the one bounded parser (datasets/validators.py ->
workbench/core/numbers.py): huge, non-finite or out-of-range values are a 400 naming the field,
through the API and the wizard's form alike."""

from __future__ import annotations

import pytest

from datasets.forms import DatasetForm
from tests.support import shapes as drawn

HOSTILE = [10**400, "9" * 400, "Infinity", "NaN", -1, 1e6]


@pytest.mark.django_db
@pytest.mark.parametrize("value", HOSTILE)
def test_it_answers_a_hostile_min_box_size_with_a_400_naming_it(owner_client, import_root, value):
    source = drawn.write_kitti(import_root / "kitti", drawn.make_shapes(2))
    body = {"source_path": str(source), "min_box_size": value}
    for url in ("/api/datasets/label-check/", "/api/datasets/"):
        response = owner_client.post(url, {"name": "n", **body}, content_type="application/json")
        assert response.status_code == 400, (url, response.content[:300])
        assert "min_box_size must be" in response.json()["errors"]["min_box_size"][0]


@pytest.mark.django_db
@pytest.mark.parametrize("value", HOSTILE)
def test_it_names_a_hostile_min_box_size_in_the_wizards_form(owner, import_root, value):
    source = drawn.write_kitti(import_root / "kitti", drawn.make_shapes(2))
    form = DatasetForm({"name": "n", "source_path": str(source), "min_box_size": value}, user=owner)
    assert not form.is_valid()
    assert "min_box_size must be" in form.errors["min_box_size"][0]
