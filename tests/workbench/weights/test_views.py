"""The staff page "Weights": reading it writes nothing; its POST files what was dropped into a cache."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.support.rows import row_counts
from tests.workbench.weights.test_import import published_as
from workbench.weights import catalog
from workbench.weights.models import StoredWeights
from workbench.weights.views import CATALOGUE_PAGE

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


def test_it_lists_filed_weights_first_and_the_catalogue_folded_filtered_and_in_pages(client, staff_user, lab_weights):
    client.force_login(staff_user)

    page = client.get(reverse("weights")).content.decode()

    assert page.index(f"<code>{lab_weights.reference}</code>") < page.index('id="catalogue"')
    assert '<details class="card" id="catalogue">' in page  # folded until asked
    assert page.count('class="missing"') == CATALOGUE_PAGE and "page 1 of" in page and "nan%" not in page
    filtered = client.get(reverse("weights"), {"q": "vgg16 features"}).content.decode()
    assert '<details class="card" id="catalogue" open>' in filtered and filtered.count('class="missing"') == 1
    # torchvision publishes NaN for a backbone-only file: said in words, never "nan%".
    assert "(torchvision IMAGENET1K_FEATURES)</td>\n        <td>not published</td>" in filtered
    last = client.get(reverse("weights"), {"page": "999"}).content.decode()
    assert 'rel="prev"' in last and 'rel="next"' not in last
    assert client.get(reverse("weights"), {"page": "x" * 5000}).status_code == 200


def test_it_says_no_accuracy_in_words_where_a_library_publishes_none_or_nan():
    features = next(item for item in catalog.torchvision_published("vgg16") if item.tag == "IMAGENET1K_FEATURES")

    assert features.accuracy == {} and features.headline == "not published"
    row = StoredWeights(network="vgg16", source="torchvision", accuracy={"acc@1": float("nan")}, dataset="ImageNet-1k")
    assert (row.top1, row.headline) == (None, "not published")
