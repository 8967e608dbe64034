"""The workbench's one per-task table: what a run's pages, API, commands and jobs do differently
for classification, detection and segmentation, one row per task (the trainer's side is
trainer/tasks/: networks, loss, metrics, predictor, export).

Every app reads its task's row (`task_row(dataset.task)`) instead of asking which task it holds,
and templates get the row from their view's context (`task`). A new task is a new row here and a
new module in trainer/tasks/; tests/workbench/core/test_task_table.py fails when a branch on a
task's name appears anywhere else.

In core, below every app: the inference pages, the runs' live charts and the datasets' pages all
read it, and it imports nothing of theirs (job kinds and page names are their plain strings).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.protocol import CLASSIFICATION, DETECTION, SEGMENTATION, TASKS


@dataclass(frozen=True)
class TaskRow:
    name: str  # trainer.protocol's name of the task (Dataset.task)
    # Inference on images: the API's and the command's action, the job kind of many images (the
    # same word: InferenceJob.Kind), the title of its page and the page's URL name and template.
    action: str
    title: str
    page: str
    template: str
    # The page of one of its jobs (a classify-many or a test), with its own script.
    job_template: str
    # The results' CSV file name (`<csv_name>-run<id>-job<id>.csv`).
    csv_name: str
    # Tested on uploaded labelled images too, or only on its dataset's splits (boxes or masks are
    # known only there).
    tests_uploads: bool
    # A test's headline on the jobs list: (the result's key, its name).
    test_headline: tuple[str, str]
    # The title of a test's results on the job page (static/inference/task_job.js reads it).
    test_title: str
    # What its test page says it measures.
    test_hint: str
    # What the export page says its exported models are checked for.
    export_agreement: str
    # Whether the export is compared with PyTorch on the dataset's images while it is made
    # (trainer.export.export_run's `examples`), or after, top-1 over up to 64 images.
    export_checked_while_made: bool
    # Whether its network is drawn layer by layer and looked inside (activations, weights): the
    # box and mask heads cannot be traced by torch.fx.
    drawn: bool
    # The run page's validation chart: title, axis and the label of its series, naming the task's
    # metrics ("accuracy" for a detector's mAP or a segmenter's mIoU said what they are not).
    metric_chart: dict[str, str]
    # The dataset pages' class histogram: its title and the unit of a bar ("images", "objects").
    counts_title: str
    counts_unit: str


TASK_TABLE: dict[str, TaskRow] = {
    CLASSIFICATION: TaskRow(
        name=CLASSIFICATION,
        action="classify",
        title="Classify",
        page="inference-classify",
        template="inference/classify.html",
        job_template="inference/job.html",
        csv_name="classified",
        tests_uploads=True,
        test_headline=("top1", "top-1"),
        test_title="Accuracy",
        test_hint="",  # the classify test page names the run's labels itself
        export_agreement="the same top-1",
        export_checked_while_made=False,
        drawn=True,
        metric_chart={"title": "Accuracy (validation)", "axis": "accuracy", "label": "Top-1 and top-5 accuracy"},
        counts_title="Images per class",
        counts_unit="images",
    ),
    DETECTION: TaskRow(
        name=DETECTION,
        action="detect",
        title="Detect",
        page="inference-detect",
        template="inference/detect.html",
        job_template="inference/task_job.html",
        csv_name="detected",
        tests_uploads=False,
        test_headline=("map_50", "mAP50"),
        test_title="Mean average precision (COCO)",
        test_hint="On the dataset's validation or test split, whose boxes are known: COCO mAP and each class's AP "
        "with its precision-recall curve, and the images with the lowest AP first, their ground truth beside the "
        "prediction.",
        export_agreement="the same boxes, classes and scores",
        export_checked_while_made=True,
        drawn=False,
        metric_chart={
            "title": "mAP and mAR (validation)",
            "axis": "mAP / mAR",
            "label": "mAP, mAP50, mAP75 and mAR@100",
        },
        counts_title="Objects per class",
        counts_unit="objects",
    ),
    SEGMENTATION: TaskRow(
        name=SEGMENTATION,
        action="segment",
        title="Segment",
        page="inference-segment",
        template="inference/segment.html",
        job_template="inference/task_job.html",
        csv_name="segmented",
        tests_uploads=False,
        test_headline=("miou", "mIoU"),
        test_title="Segmentation",
        test_hint="On the dataset's validation or test split, whose masks are known: each class's IoU, Dice and "
        "pixel accuracy, and the images with the lowest mean IoU first, their ground truth beside the prediction.",
        export_agreement="the same class for every pixel",
        export_checked_while_made=True,
        drawn=False,
        metric_chart={
            "title": "mIoU, pixel accuracy and Dice (validation)",
            "axis": "mIoU / pixel accuracy / Dice",
            "label": "mIoU, pixel accuracy and Dice",
        },
        counts_title="Images holding each class",
        counts_unit="images",
    ),
}
assert tuple(TASK_TABLE) == TASKS, "one row per task of trainer.protocol.TASKS"


def task_row(name: str | None) -> TaskRow:
    """The row of task `name`; a dataset made before tasks were recorded (none) is a classifier's.
    An unknown name fails loudly, listing the tasks."""
    try:
        return TASK_TABLE[name or CLASSIFICATION]
    except KeyError:
        raise ValueError(f"task {name!r} is not one of {', '.join(TASK_TABLE)}") from None


def row_of_action(action: str) -> TaskRow | None:
    """The row whose inference action (and many-images job kind) is `action`; None for another
    kind of job (a test, which measures whatever the run's task is)."""
    return next((row for row in TASK_TABLE.values() if row.action == action), None)
