"""The searches REST API: create, read (trials, best, budget in words), the actions, the schema."""

import io
import threading

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.workbench.runs.conftest import TINY_CONFIG
from workbench.runs.models import Run
from workbench.searches import services
from workbench.searches.management.commands.search import search_table
from workbench.searches.models import BestRun, Search, Trial
from workbench.searches.services import search_advance, search_create

SPACE = {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1}, "batch_size": {"type": "choice", "values": [4, 8]}}


def post(client, name: str, body: dict | None = None, *args):
    return client.post(reverse(name, args=args), body or {}, content_type="application/json")


def create(client, dataset, **fields):
    body = {
        "dataset": dataset.pk, "network": "lenet", "gpus": "cpu", "config": TINY_CONFIG, "space": SPACE,
        "trials": 3, "parallel": 2, "sampler": "random", "seed": 3, "gpu_hours": 10, **fields,
    }  # fmt: skip
    return post(client, "api-searches", body)


def test_it_creates_a_search_and_shows_its_trials_and_budget(transactional_db, owner_client, dataset):
    dataset.status = "building"  # its trial runs queue and never start: no worker needed
    dataset.save()
    response = create(owner_client, dataset)
    assert response.status_code == 201, response.json()
    created = response.json()
    assert created["state"] == "running" and created["direction"] == "minimize" and created["pruner"] == "asha"
    assert created["page"] == f"/searches/{created['id']}/"
    search_advance(search_id=created["id"])  # what the worker's task does on commit

    detail = owner_client.get(reverse("api-search", args=[created["id"]])).json()
    assert detail["budget"] == "2 of 3 trials, 0.0 of 10 GPU-hours"
    assert [(t["number"], t["state"], t["run_state"]) for t in detail["trials"]] == [
        (0, "running", "queued"),
        (1, "running", "queued"),
    ]
    assert set(detail["trials"][0]["params"]) == {"lr", "batch_size"} and detail["best"] is None
    # What tells the trials' runs apart leads their names: a list cuts a long name at its end.
    assert sorted(Run.objects.values_list("name", flat=True)) == [f"trial {n} · {created['name']}" for n in (0, 1)]
    listed = owner_client.get(reverse("api-searches")).json()["results"]
    assert [search["id"] for search in listed] == [created["id"]]

    conflict = post(owner_client, "api-search-train-best", {}, created["id"])
    assert conflict.status_code == 409 and "no complete trial yet" in conflict.json()["detail"]

    paused = post(owner_client, "api-search-pause", {}, created["id"]).json()
    assert paused["state"] == "paused"
    assert set(Run.objects.values_list("state", flat=True)) == {Run.State.PAUSED}
    assert post(owner_client, "api-search-pause", {}, created["id"]).status_code == 409
    assert post(owner_client, "api-search-resume", {}, created["id"]).json()["state"] == "running"
    assert set(Run.objects.values_list("state", flat=True)) == {Run.State.QUEUED}

    aborted = post(owner_client, "api-search-abort", {}, created["id"]).json()
    assert aborted["state"] == "aborted" and set(Run.objects.values_list("state", flat=True)) == {Run.State.ABORTED}
    search_advance(search_id=created["id"])  # the pass tells Optuna; no new trial starts
    assert set(Trial.objects.values_list("state", flat=True)) == {Trial.State.FAILED}
    assert Trial.objects.count() == 2


def test_it_trains_the_best_trial_as_a_full_run(transactional_db, owner_client, dataset):
    dataset.status = "building"
    dataset.save()
    search_id = create(owner_client, dataset).json()["id"]
    search_advance(search_id=search_id)
    best = Trial.objects.get(search_id=search_id, number=1)
    Trial.objects.filter(pk=best.pk).update(state=Trial.State.COMPLETE, value=0.25)
    response = post(owner_client, "api-search-train-best", {"epochs": 5}, search_id)
    assert response.status_code == 201, response.json()
    run = response.json()
    assert run["config"]["solver"]["base_lr"] == best.params["lr"] and run["config"]["epochs"] == 5
    assert run["config"]["batch_size"] == best.params["batch_size"] and run["name"].startswith("best (trial 1) · ")
    assert owner_client.get(reverse("api-search", args=[search_id])).json()["best"]["number"] == 1


def test_it_answers_a_repeated_train_the_best_with_the_run_it_queued(transactional_db, owner_client, dataset):
    dataset.status = "building"
    dataset.save()
    search_id = create(owner_client, dataset).json()["id"]
    search_advance(search_id=search_id)
    Trial.objects.filter(search_id=search_id, number=1).update(state=Trial.State.COMPLETE, value=0.25)
    trials = set(Run.objects.values_list("pk", flat=True))

    first = post(owner_client, "api-search-train-best", {"epochs": 5}, search_id)
    again = post(owner_client, "api-search-train-best", {"epochs": 5}, search_id)  # a second click
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert len(set(Run.objects.values_list("pk", flat=True)) - trials) == 1

    longer = post(owner_client, "api-search-train-best", {"epochs": 8}, search_id)  # another request
    assert longer.status_code == 201 and longer.json()["id"] != first.json()["id"]
    Run.objects.filter(pk=first.json()["id"]).update(state=Run.State.ABORTED)  # its life is over
    retry = post(owner_client, "api-search-train-best", {"epochs": 5}, search_id)
    assert retry.status_code == 201 and retry.json()["id"] not in {first.json()["id"], longer.json()["id"]}
    refused = post(owner_client, "api-search-train-best", {"epochs": "many"}, search_id)
    assert refused.status_code == 400 and "epochs" in refused.json()


def test_it_queues_one_best_run_for_two_requests_at_once(transactional_db, owner, dataset, monkeypatch):
    # The second request comes while the first holds its lock and has no run yet. On the suite's
    # database the first's reads alone already make the second wait; on PostgreSQL and a WAL
    # SQLite file it is the first write on the search's row (services.search_train_best).
    dataset.status = "building"
    dataset.save()
    search = search_create(
        owner=owner, dataset=dataset, name="s", network="lenet", config=TINY_CONFIG, space=SPACE, gpus="cpu",
        trials=2, parallel=1, sampler="random", seed=3,
    )  # fmt: skip
    search = search_advance(search_id=search.pk)
    Trial.objects.filter(search=search).update(state=Trial.State.COMPLETE, value=0.25)
    submit, answers, threads = services._submit_with, [], []

    def second_request_meanwhile(*args, **kwargs):
        # The first request holds its lock and has no run yet: the second comes in now, and waits.
        monkeypatch.setattr(services, "_submit_with", submit)
        threads.append(threading.Thread(target=lambda: answers.append(services.search_train_best(search=search))))
        threads[0].start()
        threads[0].join(1.0)
        return submit(*args, **kwargs)

    monkeypatch.setattr(services, "_submit_with", second_request_meanwhile)
    first, queued = services.search_train_best(search=search)
    threads[0].join(30)
    assert queued and answers == [(first, False)]
    assert BestRun.objects.filter(search=search).count() == 1


@pytest.mark.django_db
def test_it_refuses_a_bad_space_naming_the_field(owner_client, dataset):
    response = create(owner_client, dataset, space={"lr": {"type": "loguniform", "low": 0, "high": 0.1}})
    assert response.status_code == 400
    assert response.json() == {"space": ["lr: a log range must stay above 0 (low is 0)"]}
    assert not Search.objects.exists()


@pytest.mark.django_db
def test_it_hides_other_users_searches(client, other_user, owner, dataset):
    search = Search.objects.create(
        owner=owner, name="s", dataset=dataset, network="lenet", max_trials=1, study_name="x"
    )
    client.force_login(other_user)
    assert client.get(reverse("api-search", args=[search.pk])).status_code == 404
    assert post(client, "api-search-abort", {}, search.pk).status_code == 404
    assert client.get(reverse("api-searches")).json() == {"results": []}


@pytest.mark.django_db
def test_it_describes_the_searches_api_in_the_schema(owner_client):
    paths = owner_client.get("/api/schema/", {"format": "json"}).json()["paths"]
    for path in ("/api/searches/", "/api/searches/{id}/", "/api/searches/{id}/train-best/"):
        assert path in paths
    assert {"pause", "resume", "abort"} <= {p.rstrip("/").rsplit("/", 1)[-1] for p in paths if "searches" in p}


def test_it_starts_a_search_from_the_command_line(transactional_db, owner, dataset):
    dataset.status = "building"
    dataset.save()
    out = io.StringIO()
    call_command(
        "search", "--dataset", str(dataset.pk), "--network", "lenet", "--epochs", "2", "--batch-size", "4",
        "--gpus", "cpu", "--param", "lr=loguniform:1e-4:1e-1", "--param", "batch_size=choice:4,8", "--trials", "3",
        "--parallel", "1", "--sampler", "random", "--pruner", "median", "--objective", "top1", stdout=out,
    )  # fmt: skip
    search = Search.objects.get(pk=int(out.getvalue()))
    assert (search.direction, search.pruner, search.max_trials, search.parallel) == ("maximize", "median", 3, 1)
    assert search.space["batch_size"] == {"type": "choice", "values": [4, 8]}
    search = search_advance(search_id=search.pk)
    table = search_table(search).splitlines()
    assert table[0] == f"search {search.pk} ({search.name}): running, 1 of 3 trials, 0.0 GPU-hours"
    # Its run waits (the dataset builds): the trial says queued, not running.
    assert table[2].split()[:2] == ["0", "queued"] and "lr=" in table[2] and "batch_size=" in table[2]


@pytest.mark.django_db
def test_it_names_the_bad_param_on_the_command_line(dataset):
    common = ["search", "--dataset", str(dataset.pk), "--network", "lenet", "--gpus", "cpu"]
    with pytest.raises(CommandError, match="param: 'lr:0.1': expected NAME=TYPE"):
        call_command(*common, "--param", "lr:0.1")
    with pytest.raises(CommandError, match=r"space: lr: the range is inverted: low 0.1 is above high 0.01"):
        call_command(*common, "--param", "lr=uniform:0.1:0.01")
