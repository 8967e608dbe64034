"""The new-run page's "Create search": the run's fields are the base of every trial, the search's
card gives the space (the command line's --param words, one a line), the strategy and the budget."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.workbench.runs.web.test_wizard import errors_of, valid
from tests.workbench.searches.scripts import run_module
from workbench.searches.models import Search

pytestmark = pytest.mark.django_db(transaction=True)


def posted(dataset, **search) -> dict:
    fields = {"params": "lr=loguniform:1e-4:1e-1\nbatch_size=choice:4,8", "sampler": "random", "pruner": "asha",
              "trials": "6", "parallel": "2", **search}  # fmt: skip
    return {**valid(dataset), **{f"search-{name}": value for name, value in fields.items()}}


def test_it_offers_a_search_on_the_new_run_page_with_the_apis_defaults(owner_client, dataset):
    page = owner_client.get(reverse("run-new")).content.decode()
    assert 'id="search-card"' in page and 'formaction="/searches/new/"' in page
    assert 'name="search-trials" value="20"' in page and 'name="search-parallel" value="2"' in page
    assert 'name="search-params"' in page and "required" not in page.split('name="search-params"')[1][:60]


def test_it_names_the_objectives_and_strategies_in_words_for_the_datasets_task(owner_client, dataset):
    # Django's own labels read "Miou", "Map 50", "Tpe", "Cmaes".
    card = owner_client.get(reverse("run-new")).content.decode().split('id="search-card"')[1]
    for label in ("mIoU", "mAP50", "val. loss", "top-1", ">TPE<", ">CMA-ES<", ">ASHA<"):
        assert label in card, label
    for label in ("Miou", "Map 50", "Tpe", "Cmaes", "Asha"):
        assert label not in card, label
    # The card's script (imported by the page's) offers the chosen task's metrics only.
    select = card.split('<select name="search-objective"')[1].split("</select>")[0]
    shown = run_module(
        "searches/search_card.js",
        'const options = [...html.matchAll(/<option value="([^"]*)"/g)].map((m) => ({ value: m[1] }));'
        "const metrics = JSON.parse(html.match(/data-task-metrics=\"([^\"]*)\"/)[1].replaceAll('&quot;', '\"'));"
        "const select = { options, dataset: { taskMetrics: JSON.stringify(metrics) }, value: 'top1',"
        " get selectedOptions() { return options.filter((o) => o.value === this.value); } };"
        "const card = module.searchCard({ elements: { 'search-objective': select } });"
        "card.useTask('segmentation');"
        "console.log(JSON.stringify([options.filter((o) => !o.hidden).map((o) => o.value), select.value]));",
        html=select,
    )
    assert shown == [["", "val_loss", "miou", "pixel_accuracy", "dice"], ""]


def test_it_creates_a_search_of_the_forms_run(owner_client, owner, dataset):
    response = owner_client.post(reverse("search-new"), posted(dataset))
    search = Search.objects.get(owner=owner)
    assert response.status_code == 302 and response["Location"] == reverse("search-detail", args=[search.pk])
    assert search.space == {
        "lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1},
        "batch_size": {"type": "choice", "values": [4, 8]},
    }
    assert (search.max_trials, search.parallel, search.sampler, search.pruner) == (6, 2, "random", "asha")
    assert search.network == "lenet" and search.base_request["config"]["epochs"] == 2
    assert search.base_request["gpus"] == "cpu" and search.objective == "val_loss"


@pytest.mark.parametrize(
    ("search", "run", "field", "message"),
    [
        ({"params": "lr=loguniform:1e-4"}, {}, "params", "lr.high: expected a finite number"),
        ({"params": "lr=normal:0:1"}, {}, "params", "line 1: 'lr=normal:0:1': expected NAME=TYPE"),
        ({"params": "lr=uniform:0.1:0.01"}, {}, "params", "lr:"),
        ({"params": ""}, {}, "params", "Name at least one parameter"),
        ({"objective": "miou"}, {}, "objective", "one of top1, top5, val_loss"),
        ({"parallel": "9"}, {}, "parallel", "between 1 and the trials (6)"),
        ({}, {"base_lr": "0.1, 0.01"}, "base_lr", "A search takes one value of each field"),
    ],
)
def test_it_names_the_field_of_a_refused_search(owner_client, owner, dataset, search, run, field, message):
    data = {**posted(dataset, **search), **run}
    response = owner_client.post(reverse("search-new"), data)
    assert response.status_code == 200 and not Search.objects.filter(owner=owner).exists()
    search_errors = {name: " ".join(texts) for name, texts in response.context["search_form"].errors.items()}
    errors = {**errors_of(response), **search_errors}
    assert message in errors.get(field, ""), errors
    assert 'id="search-card" open' in response.content.decode()
