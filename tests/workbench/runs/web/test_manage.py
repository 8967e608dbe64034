"""Run management: the runs list (metrics, sparkline, sort, group, filters), rename and notes,
delete (asks first, refuses while running), abort, bulk abort/delete, and ownership."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse

from tests.support.factories import make_dataset_row
from trainer.protocol import TASK_METRICS
from workbench.runs.lifecycle import run_events_append
from workbench.runs.models import Run
from workbench.runs.services import run_create
from workbench.runs.web.manage_views import run_summary, sparkline_points

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_summaries():
    # Summaries are cached by run id and last seq, and a rolled-back test's ids come again.
    cache.clear()


@pytest.fixture
def dataset(owner):
    return make_dataset_row(owner)


def make(owner, dataset, name, *, state=Run.State.QUEUED, sweep="") -> Run:
    run = run_create(owner=owner, dataset=dataset, name=name, network="lenet", config={}, device_request={})
    Run.objects.filter(pk=run.pk).update(state=state, sweep=sweep)
    run.refresh_from_db()
    return run


def metrics(run: Run, losses, accuracies) -> None:
    events = [{"type": "metrics", "step": i, "epoch": i / 10, "loss": loss} for i, loss in enumerate(losses)]
    events += [{"type": "validation", "step": i, "epoch": i / 10, "val_loss": 1 - a, "top1": a}
               for i, a in enumerate(accuracies)]  # fmt: skip
    run_events_append(run_id=run.pk, events=events)
    run.refresh_from_db()


def test_it_shows_last_and_best_metrics_and_a_sparkline(owner_client, owner, dataset):
    run = make(owner, dataset, "trained", state=Run.State.DONE)
    metrics(run, [2.0, 1.0, 1.5, 0.5], [0.5, 0.9, 0.8])
    summary = run_summary(run)
    assert (summary["last_loss"], summary["best_loss"]) == (0.5, 0.5)
    assert (summary["metric"], summary["last_metric"], summary["best_metric"]) == ("top1", 0.8, 0.9)
    assert summary["best_val_loss"] == pytest.approx(0.1)
    assert summary["sparkline"] == sparkline_points([2.0, 1.0, 1.5, 0.5])
    body = owner_client.get(reverse("run-list")).content.decode()
    assert '<td class="metric-loss">0.5000 / 0.1000</td>' in body
    assert '<td class="metric-headline"><span class="metric-name">top-1</span> 80.00% / 90.00%' in body
    assert "<polyline" in body and summary["sparkline"] in body
    metrics(run, [0.25], [])  # a new event: the cached summary is replaced
    assert run_summary(run)["last_loss"] == 0.25


@pytest.mark.parametrize(
    ("task", "validation", "shown"),
    [
        ("detection", {"map": 0.02, "map_50": 0.05}, "mAP</span> 2.00% / 3.00%"),
        ("segmentation", {"miou": 0.02, "pixel_accuracy": 0.9, "val_loss": 1.0}, "mIoU</span> 2.00% / 3.00%"),
    ],
)
def test_it_shows_each_runs_task_headline_metric(owner_client, owner, task, validation, shown):
    run = make(owner, make_dataset_row(owner, name=task, task=task), "trained", state=Run.State.DONE)
    first = {"type": "validation", "step": 1, "epoch": 1.0, **validation, task_headline(task): 0.03}
    last = {"type": "validation", "step": 2, "epoch": 2.0, **validation}
    run_events_append(run_id=run.pk, events=[first, last])
    run.refresh_from_db()
    body = owner_client.get(reverse("run-list")).content.decode()
    cell = body.split(f'id="run-{run.pk}"')[1].split('class="metric-headline">')[1].split("</td>")[0]
    assert shown in cell  # not the classifier's "– / –"
    assert "Headline metric" in body and "top-1, mAP or mIoU" in body


def task_headline(task: str) -> str:
    return TASK_METRICS[task][0]


def test_it_sorts_groups_and_filters_by_sweep(owner_client, owner, dataset):
    low, high = make(owner, dataset, "low", sweep="s1"), make(owner, dataset, "high", sweep="s1")
    single = make(owner, dataset, "single")
    metrics(low, [1.0], [0.2])
    metrics(high, [0.1], [0.7])
    response = owner_client.get(reverse("run-list"), {"sort": "-accuracy"})
    assert [run.name for run in response.context["runs"]] == ["high", "low", "single"]
    response = owner_client.get(reverse("run-list"), {"sort": "name"})
    assert [run.name for run in response.context["runs"]] == ["high", "low", "single"]
    response = owner_client.get(reverse("run-list"), {"group": "sweep"})
    groups = [(g["sweep"], [run.name for run, _ in g["rows"]]) for g in response.context["groups"]]
    assert groups == [("s1", ["high", "low"]), ("", ["single"])]
    assert f"?runs={high.pk},{low.pk}" in response.content.decode()
    response = owner_client.get(reverse("run-list"), {"sweep": "s1"})
    assert {run.pk for run in response.context["runs"]} == {low.pk, high.pk} and single.pk


def test_it_renames_and_keeps_notes(owner_client, owner, dataset):
    run = make(owner, dataset, "old")
    response = owner_client.post(reverse("run-edit", args=[run.pk]), {"name": "  new  ", "notes": "lr too high?"})
    assert response.status_code == 302
    run.refresh_from_db()
    assert (run.name, run.notes) == ("new", "lr too high?")
    response = owner_client.post(reverse("run-edit", args=[run.pk]), {"name": "   ", "notes": ""})
    assert "This field is required." in response.content.decode()
    assert "lr too high?" in owner_client.get(reverse("run-list")).content.decode()


def test_it_asks_before_deleting_and_refuses_a_running_run(
    owner_client, owner, dataset, django_capture_on_commit_callbacks
):
    run = make(owner, dataset, "doomed", state=Run.State.DONE)
    (run.run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    page = owner_client.get(reverse("run-delete", args=[run.pk]))
    assert "Delete run doomed?" in page.content.decode() and Run.objects.filter(pk=run.pk).exists()
    with django_capture_on_commit_callbacks(execute=True):  # the files go after the commit
        assert owner_client.post(reverse("run-delete", args=[run.pk])).status_code == 302
    assert not Run.objects.filter(pk=run.pk).exists() and not run.run_dir.exists()
    running = make(owner, dataset, "busy", state=Run.State.RUNNING)
    response = owner_client.post(reverse("run-delete", args=[running.pk]), follow=True)
    assert f"run {running.pk} is running; abort it first." in response.content.decode()
    assert Run.objects.filter(pk=running.pk).exists()


def test_it_aborts_one_run_from_the_list(owner_client, owner, dataset):
    run = make(owner, dataset, "queued")
    owner_client.post(reverse("run-abort", args=[run.pk]), {"next": "/runs/"})
    run.refresh_from_db()
    assert run.state == Run.State.ABORTED
    response = owner_client.post(reverse("run-abort", args=[run.pk]), follow=True)
    assert f"run {run.pk} is aborted and cannot be aborted." in response.content.decode()


def test_it_aborts_and_deletes_in_bulk_asking_first(owner_client, owner, dataset):
    a, b = make(owner, dataset, "a"), make(owner, dataset, "b")
    running = make(owner, dataset, "c", state=Run.State.RUNNING)
    owner_client.post(reverse("run-bulk"), {"action": "abort", "ids": [a.pk, b.pk]})
    assert set(Run.objects.filter(pk__in=[a.pk, b.pk]).values_list("state", flat=True)) == {"aborted"}
    page = owner_client.post(reverse("run-bulk"), {"action": "delete", "ids": [a.pk, b.pk, running.pk]})
    assert "Delete 3 runs?" in page.content.decode() and Run.objects.count() == 3
    response = owner_client.post(reverse("run-bulk"), {"action": "delete", "ids": [a.pk, b.pk, running.pk],
                                                       "confirmed": "yes"}, follow=True)  # fmt: skip
    assert list(Run.objects.values_list("pk", flat=True)) == [running.pk]
    body = response.content.decode()
    assert "2 run(s) deleted." in body and f"run {running.pk} is running; abort it first." in body
    response = owner_client.post(reverse("run-bulk"), {"action": "explode", "ids": [running.pk]}, follow=True)
    assert "Unknown action" in response.content.decode()
    response = owner_client.post(reverse("run-bulk"), {"action": "abort"}, follow=True)
    assert "Tick at least one run first." in response.content.decode()


def test_it_keeps_other_users_runs_out_of_reach(client, owner, other_user, staff_user, dataset):
    run = make(owner, dataset, "mine")
    client.force_login(other_user)
    assert client.get(reverse("run-edit", args=[run.pk])).status_code == 404
    assert client.get(reverse("run-delete", args=[run.pk])).status_code == 404
    assert client.post(reverse("run-abort", args=[run.pk])).status_code == 404
    client.post(reverse("run-bulk"), {"action": "delete", "ids": [run.pk], "confirmed": "yes"})
    assert Run.objects.filter(pk=run.pk).exists()
    assert "mine" not in client.get(reverse("run-list")).content.decode()
    client.force_login(staff_user)
    assert client.get(reverse("run-edit", args=[run.pk])).status_code == 200


def test_it_offers_the_run_actions_on_its_pages(owner_client, owner, dataset):
    run = make(owner, dataset, "acts", state=Run.State.DONE)
    body = owner_client.get(reverse("run-edit", args=[run.pk])).content.decode()
    for url in (reverse("inference-classify", args=[run.pk]), reverse("inference-test", args=[run.pk]),
                reverse("inference-inside", args=[run.pk]), reverse("inference-export", args=[run.pk]),
                reverse("run-new") + f"?clone={run.pk}", reverse("run-delete", args=[run.pk]),
                reverse("run-detail", args=[run.pk])):  # fmt: skip
        assert f'href="{url}"' in body
