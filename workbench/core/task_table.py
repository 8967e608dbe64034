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

from dataclasses import asdict, dataclass

from trainer.protocol import CLASSIFICATION, DETECTION, SEGMENTATION, TASK_TRAITS, TASKS


@dataclass(frozen=True)
class TestReport:
    """How a test's results are told: a headline of measures, then one line per class with its
    count (shown whole) and its measures (percentages); each a (result key, name) pair. "{top_k}"
    in a name is the test's k."""

    headline: tuple[tuple[str, str], ...]
    count: tuple[str, str]
    per_class: tuple[tuple[str, str], ...]
    # The job page's only (static/inference/task_job.js): the score the worst images are sorted by
    # and the title of their gallery, and whether each class's precision-recall curve is drawn.
    worst: tuple[str, str] = ("", "")
    worst_title: str = ""
    curves: bool = False

    def as_json(self) -> dict:
        """For the page's json_script (templates call it without arguments)."""
        return asdict(self)


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
    # The title of a test's results on the job page (inference/task_job.html).
    test_title: str
    # What its test page says it measures.
    test_hint: str
    # A test's results in the `infer` command's words (workbench/inference/management/common.py).
    test_words: TestReport
    # ... and on its job page (job_template): None where that page is the classifier's own.
    test_page: TestReport | None
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
    # What an image of the dataset built without any label lacks (the dataset page's statistics).
    nothing_labelled: str
    # What its runs' augmentations carry along with each image, when it takes no recipe.
    targets: str
    # A search's objective when it names none: a classifier's validation loss (top-1 saturates on
    # small sets), another task's first metric (trainer.protocol.TASK_METRICS).
    search_objective: str

    @property
    def has_one_label_per_image(self) -> bool:
        """Whether each image carries one label (in its own record): what a label check doubts
        (workbench/labelchecks); boxes and masks are the trainer's targets instead."""
        return not TASK_TRAITS[self.name].targets_db

    @property
    def takes_recipe(self) -> bool:
        """Whether its runs take the classifiers' recipe (the presets and the recipe augmentations)
        and so the new-run page's preview of it: the trainer's trait (TaskTraits.augments, which
        trainer/recipes.py recipe_refusal reads); another task's runs flip, scale-jitter and crop
        each image together with its `targets`."""
        return TASK_TRAITS[self.name].augments


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
        test_words=TestReport(
            headline=(("top1", "top-1"), ("top5", "top-{top_k}")),
            count=("support", "images"),
            per_class=(("precision", "precision"), ("recall", "recall"), ("f1", "F1")),
        ),
        test_page=None,  # inference/job.html (static/inference/job.js)
        export_agreement="the same top-1",
        export_checked_while_made=False,
        drawn=True,
        metric_chart={"title": "Accuracy (validation)", "axis": "accuracy", "label": "Top-1 and top-5 accuracy"},
        counts_title="Images per class",
        counts_unit="images",
        nothing_labelled="",
        targets="label",
        search_objective="val_loss",
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
        test_words=TestReport(
            headline=(("map", "mAP"), ("map_50", "mAP50"), ("map_75", "mAP75"), ("mar_100", "mAR@100")),
            count=("instances", "instances"),
            per_class=(("ap", "AP"), ("ap50", "AP50"), ("ar100", "AR@100")),
        ),
        test_page=TestReport(
            headline=(("map", "mAP@[.5:.95]"), ("map_50", "mAP50"), ("map_75", "mAP75"), ("mar_100", "mAR@100")),
            count=("instances", "Boxes"),
            per_class=(("ap", "AP@[.5:.95]"), ("ap50", "AP50"), ("ar100", "AR@100")),
            worst=("ap50", "AP50"),
            worst_title="Lowest AP50 first",
            curves=True,
        ),
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
        nothing_labelled="an object",
        targets="boxes",
        search_objective="map",
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
        test_words=TestReport(
            headline=(("miou", "mIoU"), ("pixel_accuracy", "pixel accuracy"), ("dice", "Dice")),
            count=("pixels", "pixels"),
            per_class=(("iou", "IoU"), ("dice", "Dice"), ("accuracy", "accuracy")),
        ),
        test_page=TestReport(
            headline=(("miou", "mIoU"), ("dice", "Dice"), ("pixel_accuracy", "Pixel accuracy")),
            count=("pixels", "Pixels"),
            per_class=(("iou", "IoU"), ("dice", "Dice"), ("accuracy", "Pixel accuracy")),
            worst=("miou", "mIoU"),
            worst_title="Lowest mean IoU first",
        ),
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
        nothing_labelled="a class pixel",
        targets="mask",
        search_objective="miou",
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
