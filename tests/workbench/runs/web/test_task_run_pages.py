"""The run page and the new-run form of a detection or segmentation dataset: the validation chart
and the best metric in the task's own names, the classification-only recipe not offered, and an
"Elapsed" that counts every attempt from start to end."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from datasets.models import Dataset
from trainer.protocol import TASK_METRICS
from workbench.runs.models import Run, RunTransition

pytestmark = pytest.mark.django_db


def page_of(response) -> dict:
    html = response.content.decode()
    return json.loads(html.split('id="run-page" type="application/json">')[1].split("</script>")[0])


@pytest.mark.parametrize(
    ("task", "title", "axis"),
    [
        ("classification", "Accuracy (validation)", "accuracy"),
        ("detection", "mAP and mAR (validation)", "mAP / mAR"),
        ("segmentation", "mIoU, pixel accuracy and Dice (validation)", "mIoU / pixel accuracy / Dice"),
    ],
)
def test_it_names_the_tasks_metrics_on_the_validation_chart(owner_client, run, task, title, axis):
    Dataset.objects.filter(pk=run.dataset_id).update(task=task)
    response = owner_client.get(reverse("run-detail", args=[run.pk]))
    assert f'<h2 id="metric-chart-title">{title}</h2>' in response.content.decode()
    assert page_of(response)["metric_chart"]["axis"] == axis


def test_it_counts_elapsed_from_start_to_end_over_every_attempt(owner_client, run):
    # 10 s running, paused 100 s, then 26 s more: 36 s, whatever the trainer's loop timed.
    start = timezone.now() - timedelta(hours=1)
    for offset, state in ((0, "running"), (10, "paused"), (110, "queued"), (110, "running"), (136, "done")):
        RunTransition.objects.create(run=run, to_state=state, at=start + timedelta(seconds=offset))
    Run.objects.filter(pk=run.pk).update(state=Run.State.DONE)
    page = page_of(owner_client.get(reverse("run-detail", args=[run.pk])))
    assert page["elapsed_seconds"] == pytest.approx(36)


def test_it_offers_every_tasks_best_metric_and_marks_the_classification_only_fields(owner_client, dataset):
    response = owner_client.get(reverse("run-new"))
    form = response.context["form"]
    widget = form["best_metric"].field.widget
    assert json.loads(widget.attrs["data-task-metrics"]) == {task: list(names) for task, names in TASK_METRICS.items()}
    assert {"map", "map_50", "miou", "pixel_accuracy", "top1", "val_loss"} <= {v for v, _ in widget.choices}
    marked = {name for name, field in form.fields.items() if "data-classification-only" in field.widget.attrs}
    assert {"preset", "mixup_alpha", "cutmix_alpha", "label_smoothing", "random_resized_crop"} <= marked
    assert "ema_decay" not in marked and "best_metric" not in marked
    assert 'name="mixup_alpha"' in response.content.decode()


@pytest.mark.parametrize(("task", "targets"), [("detection", "boxes"), ("segmentation", "mask")])
def test_it_tells_the_page_the_tasks_runs_take_no_recipe_and_why_nothing_is_previewed(
    owner_client, dataset, task, targets
):
    Dataset.objects.filter(pk=dataset.pk).update(task=task)
    body = owner_client.get(reverse("run-new-networks"), {"dataset": dataset.pk, "only": "lenet"}).json()
    assert (body["task"], body["recipe"]) == (task, False)
    refused = owner_client.post(reverse("run-new-augment-preview"), {"dataset": dataset.pk, "crop_size": "8"})
    why = refused.json()["errors"]["__all__"]
    assert refused.status_code == 400
    assert f"{task} dataset: its runs flip, scale-jitter and crop each image together with its {targets}," in why


def test_it_tells_the_page_a_classifiers_runs_take_the_recipe(owner_client, dataset):
    body = owner_client.get(reverse("run-new-networks"), {"dataset": dataset.pk, "only": "lenet"}).json()
    assert (body["task"], body["recipe"]) == ("classification", True)
