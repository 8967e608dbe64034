"""The pages' doors to changing a shared object: a viewer reads why they may not (403 naming
their role), a non-member gets 404, an editor may; and a run started on a project's dataset
goes into that project, owned by whoever started it."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.support.factories import make_dataset_row
from tests.workbench.runs.test_pretrained import REFUSED, run_with_checkpoint
from workbench.benchmarks.models import Benchmark
from workbench.benchmarks.services import benchmark_submit
from workbench.runs.models import Run
from workbench.runs.services import run_create
from workbench.weights.models import UploadedWeights

pytestmark = pytest.mark.django_db


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def shared(owner, project):
    dataset = make_dataset_row(owner, name="digits", project=project)
    run = Run.objects.create(owner=owner, name="alice-run", dataset=dataset, network="lenet", project=project)
    benchmark = Benchmark.objects.create(owner=owner, name="b", project=project)
    return dataset, run, benchmark


def test_it_refuses_a_viewer_every_change_page_with_the_reason(viewer, other_user, shared):
    dataset, run, benchmark = shared
    doors = [
        ("get", f"/runs/{run.pk}/edit/"), ("post", f"/runs/{run.pk}/edit/"), ("get", f"/runs/{run.pk}/delete/"),
        ("post", f"/runs/{run.pk}/delete/"), ("post", f"/runs/{run.pk}/abort/"),
        ("get", f"/datasets/{dataset.pk}/delete/"), ("post", f"/datasets/{dataset.pk}/delete/"),
        ("post", f"/datasets/{dataset.pk}/cancel/"), ("post", f"/datasets/{dataset.pk}/rebuild/"),
        ("post", f"/benchmarks/{benchmark.pk}/cancel/"),
    ]  # fmt: skip
    for method, url in doors:
        answer = getattr(_as(viewer), method)(url)
        assert answer.status_code == 403, (method, url, answer.status_code)
        assert "you are a viewer of project vision-lab" in answer.content.decode(), url
        assert getattr(_as(other_user), method)(url).status_code == 404, url
    assert _as(viewer).get(f"/runs/{run.pk}/").status_code == 200
    assert Run.objects.get(pk=run.pk).state == Run.State.QUEUED


def test_it_says_which_ticked_runs_a_viewer_may_not_change(viewer, shared):
    run = shared[1]
    answer = _as(viewer).post("/runs/bulk/", {"ids": [run.pk], "action": "abort"}, follow=True)
    assert f"Run #{run.pk}: you are a viewer of project vision-lab" in answer.content.decode()
    assert Run.objects.get(pk=run.pk).state == Run.State.QUEUED


def test_it_lets_an_editor_abort_from_the_page(editor, shared):
    run = shared[1]
    _as(editor).post(f"/runs/{run.pk}/abort/")
    assert Run.objects.get(pk=run.pk).state == Run.State.ABORTED


def test_it_puts_a_run_on_a_projects_dataset_into_the_project_owned_by_its_starter(viewer, shared, staff_user):
    dataset = shared[0]
    request = {"cpu": True, "gpus": 0}
    mine = run_create(owner=viewer, dataset=dataset, name="vic", network="lenet", config={}, device_request=request)
    assert (mine.owner, mine.project) == (viewer, dataset.project)
    # Staff see the dataset without being members: their run stays theirs alone.
    theirs = run_create(owner=staff_user, dataset=dataset, name="c", network="lenet", config={}, device_request=request)
    assert theirs.project is None
    private = run_create(
        owner=viewer, dataset=make_dataset_row(viewer), name="p", network="lenet", config={}, device_request=request
    )
    assert private.project is None


def test_it_lists_shared_uploads_and_lets_a_viewer_use_but_not_delete_them(owner, viewer, project):
    upload = UploadedWeights.objects.create(owner=owner, name="lab.pth", path="pretrained/x.pth", project=project)
    listed = _as(viewer).get("/api/pretrained/").json()["results"]
    assert [(w["id"], w["owner"], w["project"]) for w in listed] == [(upload.pk, "alice", "vision-lab")]
    refused = _as(viewer).delete(f"/api/pretrained/{upload.pk}/")
    assert refused.status_code == 403 and "you are a viewer" in refused.json()["detail"]


def test_it_lets_a_viewer_fine_tune_from_a_shared_run_and_no_stranger(owner, viewer, other_user, shared):
    dataset = shared[0]
    source = run_with_checkpoint(owner)  # a run with a best checkpoint, of alice's alone so far
    body = {"dataset": dataset.pk, "network": "lenet", "epochs": 1, "batch_size": 8, "gpus": "cpu",
            "config": {"pretrained": f"run:{source.pk}"}}  # fmt: skip
    refused = _as(viewer).post("/api/runs/", body, content_type="application/json")
    assert refused.status_code == 400 and refused.json() == {"config": [REFUSED]}, refused.json()
    Run.objects.filter(pk=source.pk).update(project=dataset.project)  # shared into the project
    started = _as(viewer).post("/api/runs/", body, content_type="application/json")
    assert started.status_code == 201, started.json()
    fine_tuned = Run.objects.get(pk=started.json()["id"])
    assert (fine_tuned.owner, fine_tuned.project, fine_tuned.config["pretrained"]) == (
        viewer,
        dataset.project,
        f"run:{source.pk}",
    )
    stranger = _as(other_user).post("/api/runs/", body, content_type="application/json")
    assert stranger.status_code == 400 and not Run.objects.filter(owner=other_user).exists()


def test_it_puts_a_benchmark_on_a_projects_dataset_into_the_project(viewer, shared):
    dataset = shared[0]
    grid = {"networks": ["lenet"], "image_size": 28, "gpus": "1", "batch_sizes": "8", "steps": 3}
    on_dataset = benchmark_submit(owner=viewer, request={**grid, "data": f"dataset:{dataset.pk}"})
    assert (on_dataset.owner, on_dataset.project) == (viewer, dataset.project)
    assert benchmark_submit(owner=viewer, request=grid).project is None  # synthetic images: the viewer's alone


def test_it_puts_a_new_run_into_the_project_its_request_names_or_none(owner, viewer, other_user, shared, project):
    def submit(user, dataset, **fields):
        body = {"dataset": dataset.pk, "network": "lenet", "gpus": "cpu", **fields}
        return _as(user).post("/api/runs/", body, content_type="application/json")

    on_shared = shared[0]
    kept_out = submit(viewer, on_shared, project=None)
    assert kept_out.status_code == 201 and kept_out.json()["project"] is None
    mine = make_dataset_row(viewer, name="vic's own")
    put_in = submit(viewer, mine, project="vision-lab")
    assert put_in.status_code == 201 and put_in.json()["project"] == "vision-lab"
    for slug in ("no-such-lab", project.slug):  # one that does not exist, one bob is not in: the same answer
        refused = submit(other_user, make_dataset_row(other_user, name=f"bob's {slug}"), project=slug)
        assert refused.status_code == 400 and refused.json() == {"project": [f"no project {slug!r} of yours"]}
