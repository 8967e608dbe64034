"""What the new-run form starts from on a dataset, by its task and its training images: a batch
the pre-flight accepts (trainer/preflight.py batch_refusal, the rule at submit and at launch) and
the task's own best metric, and the fields only a classifier's loader reads. The page's script
(static/runs/task_fields.js) applies the same values when another dataset is chosen."""

from __future__ import annotations

from datasets.models import Dataset
from trainer.config import default_of
from trainer.preflight import batch_refusal
from trainer.protocol import CLASSIFICATION, TASK_METRICS

# Read by the classifier's loader only (trainer/tasks/classification.py: the crop, the mean image,
# the vertical flip); a detector's or a segmenter's loader flips each image with its targets and
# reads none of these. Offered, like the recipe, where the task takes the recipe (its row's
# takes_recipe, what new_run's dataset facts carry): the same tasks, whose loader is the classifier's.
CLASSIFIER_LOADER = ("crop_size", "mean_subtraction", "vertical_flip")


def train_images(dataset: Dataset) -> int:
    return int((dataset.splits or {}).get("train", {}).get("count", 0))


def batch_default(train: int) -> int:
    """The trainer's default batch, halved until the pre-flight takes it on `train` training images
    (64 on 52 images opened the form invalid; 0 images: not known yet, the default stands)."""
    batch = default_of("batch_size")
    while batch > 1 and batch_refusal(batch, train):
        batch //= 2
    return batch


def task_defaults(dataset: Dataset) -> dict[str, str]:
    """The form's starting values on `dataset`, as the form shows them (text)."""
    return {
        "batch_size": str(batch_default(train_images(dataset))),
        "best_metric": TASK_METRICS[dataset.task or CLASSIFICATION][0],
    }
