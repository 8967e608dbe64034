"""What a label check accepts, for the API, the page and the command alike."""

from __future__ import annotations

from trainer.config import networks_of
from trainer.messages import shown
from trainer.protocol import TASK_TRAITS
from workbench.core.errors import RequestError

MIN_FOLDS, MAX_FOLDS, DEFAULT_FOLDS = 2, 10, 5


def check_folds(value) -> int:
    if value is None:
        return DEFAULT_FOLDS
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if type(value) is not int or not MIN_FOLDS <= value <= MAX_FOLDS:
        raise RequestError("folds", f"{shown(value)} is not a whole number from {MIN_FOLDS} to {MAX_FOLDS}")
    return value


def check_network(network, *, task: str) -> str:
    """One of the networks the dataset's task trains (its fold runs check the rest of the config)."""
    choices = networks_of(task)
    if network not in choices:
        raise RequestError("network", f"{shown(network)} is not one of {', '.join(choices)}")
    return network


def check_dataset(dataset) -> None:
    """A ready dataset whose images each carry one label."""
    if dataset.status != dataset.Status.READY:
        raise RequestError("dataset", f"dataset {dataset.pk} is {dataset.status}, not ready")
    if TASK_TRAITS[dataset.task].targets_db:
        raise RequestError(
            "dataset", f"a {dataset.task} dataset's boxes and masks are not checked yet: only one label per image is"
        )


def check_pool(*, images: int, classes_used: int, folds: int) -> None:
    """Enough images for every fold to train on, of at least two classes."""
    if classes_used < 2:
        raise RequestError("dataset", "its images hold one class: there is no other label to suggest")
    if images < 2 * folds:
        raise RequestError("folds", f"{folds} folds need at least {2 * folds} images; the dataset has {images}")
