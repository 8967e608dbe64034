"""The staff page "Weights": reading it writes nothing; its POST files what was dropped into a cache."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.support.rows import row_counts
from tests.workbench.weights.test_import import published_as
from workbench.weights.models import StoredWeights

pytestmark = pytest.mark.django_db


def test_it_writes_nothing_on_a_get_and_files_dropped_files_on_its_post(client, staff_user, store, mobilenet_file,
                                                                        monkeypatch):  # fmt: skip
    fake = published_as(monkeypatch, mobilenet_file)
    store.TORCH_HUB_CHECKPOINTS.mkdir(parents=True)
    (store.TORCH_HUB_CHECKPOINTS / fake.file_name).write_bytes(mobilenet_file.read_bytes())
    client.force_login(staff_user)
    before = row_counts()

    page = client.get(reverse("weights")).content.decode()

    assert row_counts() == before
    assert "Look in the caches" in page and f"<code>{fake.file_name}</code>" not in page

    response = client.post(reverse("weights"))

    assert response.status_code == 302
    assert StoredWeights.objects.get().file_name == fake.file_name
    page = client.get(response.url).content.decode()
    assert "Looked in the caches: 1 newly filed." in page and f"<code>{fake.file_name}</code>" in page
