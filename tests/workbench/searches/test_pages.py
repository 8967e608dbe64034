"""The search page and its plots (Optuna's figures as Plotly JSON)."""

import optuna
from django.urls import reverse

from tests.workbench.runs.conftest import TINY_CONFIG
from workbench.searches import studies
from workbench.searches.models import Trial
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
    assert "trial 0, val_loss 0.5000" in page and 'src="/static/searches/search_detail.js"' in page

    listed = owner_client.get(reverse("search-list")).content.decode()
    assert f'href="/searches/{search.pk}/"' in listed and "2 of 4 trials, 0.0 GPU-hours" in listed

    figures = owner_client.get(reverse("search-plots", args=[search.pk])).json()["figures"]
    assert set(figures) == {"history", "intermediate", "parallel", "importance", "slice"}
    assert figures["history"]["figure"]["data"] and figures["intermediate"]["figure"]["data"]
    assert figures["importance"]["figure"] is None and figures["importance"]["note"] == "needs two complete trials"

    client.force_login(other_user)
    assert client.get(reverse("search-detail", args=[search.pk])).status_code == 404
    assert client.get(reverse("search-plots", args=[search.pk])).status_code == 404
