"""The network drawn as its graph of layers, with output shapes and parameter counts: over the
API for a run and for a run not created yet, and in Chromium on the new-run page and the run page."""

from __future__ import annotations

import json

import pytest

from datasets.models import Dataset
from tests.conftest import log_in
from tests.support.factories import make_dataset_row
from tests.support.trainer_data import make_dataset_folder
from workbench.runs.models import Run
from workbench.runs.services import run_create


@pytest.fixture
def digits(owner):
    dataset = make_dataset_row(
        owner, name="digits", image_width=8, image_height=8, channels=1,
        labels=["0", "1", "2"], splits={"train": {"count": 240}, "val": {"count": 60}},
    )  # fmt: skip
    make_dataset_folder(dataset.path)
    return dataset


def _graph(client, **params):
    return client.get("/api/networks/graph/", params)


def test_it_draws_a_run_s_network_with_shapes_and_parameters(owner_client, client, other_user, digits, owner):
    run = run_create(owner=owner, dataset=digits, name="g", network="lenet", config={"epochs": 1},
                     device_request={"kind": "cpu"})  # fmt: skip
    body = owner_client.get(f"/api/runs/{run.pk}/network/").json()
    kinds = [node["type"] for node in body["nodes"]]
    assert kinds[:3] == ["Input", "Conv2d", "MaxPool2d"]
    assert body["nodes"][1]["shape"] == [20, 8, 8] and body["nodes"][1]["params"] == 1 * 20 * 25 + 20
    assert body["output"] == [3]
    assert sum(node["params"] for node in body["nodes"]) == body["params"]
    client.force_login(other_user)
    assert client.get(f"/api/runs/{run.pk}/network/").status_code == 404


def test_it_draws_branches_and_skip_connections(owner_client, digits):
    body = _graph(owner_client, network="resnet18", dataset=digits.pk).json()
    adds = [node for node in body["nodes"] if node["type"] == "add"]
    assert len(adds) == 8 and all(len(node["inputs"]) == 2 for node in adds)
    Dataset.objects.filter(pk=digits.pk).update(image_width=32, image_height=32)
    body = _graph(owner_client, network="googlenet", dataset=digits.pk, crop_size="").json()
    assert any(node["type"] == "cat" and len(node["inputs"]) == 4 for node in body["nodes"])


def test_it_draws_a_custom_network_and_says_why_a_network_does_not_fit(owner_client, digits):
    layers = [{"type": "conv2d", "out_channels": 4, "kernel_size": 3}, {"type": "flatten"}, {"type": "linear"}]
    body = _graph(owner_client, network="custom", dataset=digits.pk, custom_layers=json.dumps(layers)).json()
    assert [node["shape"] for node in body["nodes"]] == [[1, 8, 8], [4, 6, 6], [144], [3]]
    refused = _graph(owner_client, network="alexnet", dataset=digits.pk)
    assert refused.status_code == 400
    assert "alexnet needs images of at least 63x63" in refused.json()["network"][0]
    assert _graph(owner_client, network="lenet", dataset=999).status_code == 400


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_shows_the_graph_on_the_new_run_page_and_the_run_page(live_server_url, page, owner, digits):
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    # Images resnet18 can take: the form disables a network too big for the dataset's images.
    Dataset.objects.filter(pk=digits.pk).update(image_width=32, image_height=32)
    log_in(page, live_server_url, owner.username)
    # The fits' first answer loads torch in the web process and sizes every network.
    with page.expect_response(lambda r: "/runs/new/networks/" in r.url, timeout=60_000) as fits:
        page.goto(f"{live_server_url}/runs/new/?dataset={digits.pk}")
    assert fits.value.status == 200, fits.value.text()
    assert "63x63" in fits.value.json()["networks"]["alexnet"]["problem"], fits.value.text()
    card = page.locator("#network-graph")
    page.wait_for_function("document.querySelectorAll('#network-graph svg .layer').length > 0")
    assert "lenet" in card.locator(".netgraph-summary").inner_text()
    # A chain of layers is folded into bands that fill the card's width, not a fifth of it.
    filled = "document.querySelector('#network-graph svg').getBoundingClientRect().width"
    assert page.evaluate(filled) >= 0.9 * page.evaluate("document.querySelector('.netgraph-canvas').clientWidth")
    # Every fit answered: the zoo's answers move the rows, and a click between two missed its radio.
    page.wait_for_selector("#network-table[data-fits=done]", state="attached", timeout=120_000)
    page.check("#network-resnet18")
    summary = "document.querySelector('#network-graph .netgraph-summary').textContent"
    page.wait_for_function(f"{summary}.startsWith('resnet18')")
    assert card.locator("svg .layer-add").count() == 8
    assert "69 layers, 11.2 M parameters" in card.locator(".netgraph-summary").inner_text()
    # A network too big for the images cannot be chosen once the page knows the fits; its row says why.
    page.wait_for_function("document.querySelector('#network-alexnet').disabled")
    assert "63x63" in page.locator("tr[data-network=alexnet] .network-fit").inner_text()
    assert page.is_checked("#network-resnet18")

    run = run_create(owner=owner, dataset=digits, name="graph", network="resnet18", config={"epochs": 1},
                     device_request={"kind": "cpu"})  # fmt: skip
    Run.objects.filter(pk=run.pk).update(state=Run.State.DONE)
    page.goto(f"{live_server_url}/runs/{run.pk}/")
    page.click("#network-graph summary")
    page.wait_for_function("document.querySelectorAll('#network-graph svg .layer').length > 60")
    assert card.locator("svg .layer-conv2d").count() == 20
    assert page.evaluate(filled) >= 0.9 * page.evaluate("document.querySelector('.netgraph-canvas').clientWidth")
    assert errors == []
