"""The search page and its plots (Optuna's figures as Plotly JSON)."""

import optuna
from django.urls import reverse

from tests.workbench.runs.conftest import TINY_CONFIG
from workbench.runs.models import Run
from workbench.searches import studies
from workbench.searches.models import Search, Trial
from workbench.searches.services import search_advance, search_create, search_pause

SPACE = {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1}, "batch_size": {"type": "choice", "values": [4, 8]}}


def test_it_shows_the_trials_and_optunas_plots(transactional_db, owner_client, other_user, client, owner, dataset):
    dataset.status = "building"  # its trial runs queue and never start: no worker needed
    dataset.save()
    search = search_create(
        owner=owner, dataset=dataset, name="lr and batch", network="lenet", config=TINY_CONFIG, space=SPACE,
        gpus="cpu", trials=4, parallel=2, sampler="random", seed=1,
    )  # fmt: skip
    search = search_advance(search_id=search.pk)
    # Paused, so that no pass (the session's worker beats and passes every running search) starts
    # trials 2 and 3 in the slots the two below free: the page shows what this test built.
    search = search_pause(search=search)
    # Two trials as if they had trained: one complete, one pruned at epoch 1.
    study = studies.study_for(search)
    for trial, values, state in [(0, [0.9, 0.5], "complete"), (1, [1.1], "pruned")]:
        reported = optuna.trial.Trial(study, search.trials.get(number=trial).study_trial_id)
        for epoch, value in enumerate(values, start=1):
            reported.report(value, epoch)
        final = optuna.trial.TrialState.COMPLETE if state == "complete" else optuna.trial.TrialState.PRUNED
        study.tell(trial, values[-1] if state == "complete" else None, state=final)
        Trial.objects.filter(search=search, number=trial).update(state=state, value=values[-1], rung=len(values))

    page = owner_client.get(reverse("search-detail", args=[search.pk])).content.decode()
    assert f"Search #{search.pk}: lr and batch" in page and "2 of 4 trials, 0.0 GPU-hours" in page
    assert "trial 0, val. loss 0.5000" in page and 'src="/static/searches/search_detail.js"' in page

    listed = owner_client.get(reverse("search-list")).content.decode()
    assert f'href="/searches/{search.pk}/"' in listed and "2 of 4 trials, 0.0 GPU-hours" in listed

    figures = owner_client.get(reverse("search-plots", args=[search.pk])).json()["figures"]
    assert set(figures) == {"history", "intermediate", "parallel", "importance", "slice"}
    assert figures["history"]["figure"]["data"] and figures["intermediate"]["figure"]["data"]
    assert figures["importance"]["figure"] is None and figures["importance"]["note"] == "needs two complete trials"
    # The page heads each figure: Optuna's own title above the plot said it twice.
    assert "title" not in figures["history"]["figure"]["layout"]

    client.force_login(other_user)
    assert client.get(reverse("search-detail", args=[search.pk])).status_code == 404
    assert client.get(reverse("search-plots", args=[search.pk])).status_code == 404


def _two_queued_trials(owner, dataset) -> Search:
    dataset.status = "building"  # its trial runs queue and never start
    dataset.save()
    search = search_create(
        owner=owner, dataset=dataset, name="waits", network="lenet", config=TINY_CONFIG, space=SPACE, gpus="cpu",
        trials=4, parallel=2, sampler="tpe", seed=1,
    )  # fmt: skip
    return search_advance(search_id=search.pk)


def test_it_says_a_trial_waits_while_its_run_is_queued_and_why(transactional_db, owner_client, owner, dataset):
    search = _two_queued_trials(owner, dataset)
    first, second = search.trials.order_by("number")
    Run.objects.filter(pk=first.run_id).update(wait_reason="dataset still building")
    Run.objects.filter(pk=second.run_id).update(state=Run.State.RUNNING)

    trials = owner_client.get(reverse("api-search", args=[search.pk])).json()["trials"]
    assert [(t["state"], t["status"], t["wait_reason"]) for t in trials] == [
        ("running", "queued", "dataset still building"),
        ("running", "running", ""),
    ]
    page = owner_client.get(reverse("search-detail", args=[search.pk])).content.decode()
    rows = page.split("<tbody>")[1].split("</tbody>")[0]
    assert '<td class="trial-status">queued</td>' in rows and "waiting: dataset still building" in rows
    assert '<td class="trial-status">running</td>' in rows


def test_it_writes_the_search_in_words_and_its_values_short(transactional_db, owner_client, owner, dataset):
    search = _two_queued_trials(owner, dataset)
    Trial.objects.filter(search=search, number=0).update(params={"lr": 0.00012345678901234567, "batch_size": 8})
    page = owner_client.get(reverse("search-detail", args=[search.pk])).content.decode()
    assert "lr=0.0001235, batch_size=8" in page and "0.00012345678" not in page
    assert "TPE sampler, ASHA pruner; objective val. loss (minimize)" in page
    assert 'id="search-plots-note"' in page and "Loading" in page.split('id="search-plots-note"')[1][:60]


def test_it_offers_the_actions_the_searchs_state_allows(transactional_db, owner_client, owner, dataset):
    search = _two_queued_trials(owner, dataset)

    def offered() -> dict:
        page = owner_client.get(reverse("search-detail", args=[search.pk])).content.decode()
        names = ("pause", "resume", "abort", "train-best")
        buttons = {name: page.split(f'id="search-{name}"')[1].split(">")[0] for name in names}
        api = owner_client.get(reverse("api-search", args=[search.pk])).json()["actions"]
        assert api == {name: "disabled" not in attrs for name, attrs in buttons.items()}
        return api

    assert offered() == {"pause": True, "resume": False, "abort": True, "train-best": False}
    search_pause(search=search)
    Trial.objects.filter(search=search, number=0).update(state=Trial.State.COMPLETE, value=0.5)
    assert offered() == {"pause": False, "resume": True, "abort": True, "train-best": True}
    Search.objects.filter(pk=search.pk).update(state=Search.State.ABORTED)
    assert offered() == {"pause": False, "resume": False, "abort": False, "train-best": True}


def test_it_lists_the_searches_from_the_navigation(transactional_db, owner_client, owner, dataset):
    home = owner_client.get(reverse("home")).content.decode()
    assert 'href="/searches/"' in home.split('aria-label="Main"')[1].split("</nav>")[0]
    empty = owner_client.get(reverse("search-list")).content.decode()
    assert 'href="/runs/new/?search=1#search-card"' in empty and "POST /api/searches/" not in empty
    card = owner_client.get("/runs/new/?search=1").content.decode()
    assert '<details class="card" id="search-card" open>' in card
    search = _two_queued_trials(owner, dataset)
    listed = owner_client.get(reverse("search-list")).content.decode()
    assert 'aria-current="page">Searches' in listed and "TPE, ASHA" in listed and "val. loss (minimize)" in listed
    assert f'href="/searches/{search.pk}/"' in listed
