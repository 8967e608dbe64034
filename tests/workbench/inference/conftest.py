"""A really trained run for the inference tests: LeNet trained by the real trainer for two epochs
on scikit-learn's 8x8 digits (once per session), copied into each test's Run folder."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from tests.support.trainer_data import make_digits_folder
from trainer.config import config_from_dict
from trainer.run import train
from workbench.runs.models import Run
from workbench.runs.services import run_create


@pytest.fixture(scope="session")
def trained(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("trained")
    folder = make_digits_folder(root / "digits")
    run_dir = root / "run"
    config = {"run_dir": str(run_dir), "network": "lenet", "devices": ["cpu"], "epochs": 2, "batch_size": 32,
              "metrics_interval": 5, "data": {"dataset": str(folder), "num_workers": 0},
              "solver": {"optimizer": "adam", "base_lr": 0.003}}  # fmt: skip
    assert train(config_from_dict(config)) == 0
    return {"dataset": folder, "run_dir": run_dir, "meta": json.loads((folder / "dataset.json").read_text())}


def done_run(trained: dict, owner, *, name: str, network: str, config: dict, dataset_name: str = "digits") -> Run:
    """A done run of `owner` whose folder holds `trained`'s checkpoints and dataset (a module's
    trainer run, copied so each test has its own rows and folders)."""
    meta = trained["meta"]
    dataset = make_dataset_row(
        owner, name=dataset_name, image_width=8, image_height=8, channels=1,
        labels=meta["labels"], splits=meta["splits"],
    )  # fmt: skip
    # Rows are rolled back after each test and their ids used again; a folder left by an earlier
    # test under the same id must not mix into this one.
    shutil.rmtree(dataset.path, ignore_errors=True)
    shutil.copytree(trained["dataset"], dataset.path)
    run = run_create(owner=owner, dataset=dataset, name=name, network=network, config=config,
                     device_request={"kind": "cpu"})  # fmt: skip
    Run.objects.filter(pk=run.pk).update(state=Run.State.DONE, progress=1.0)
    run.refresh_from_db()
    shutil.rmtree(run.run_dir, ignore_errors=True)
    shutil.copytree(Path(trained["run_dir"]) / "checkpoints", run.run_dir / "checkpoints")
    return run


@pytest.fixture
def digits_run(trained, owner) -> Run:
    """A done run of `owner` whose folder holds the trained checkpoints and dataset."""
    return done_run(trained, owner, name="digits lenet", network="lenet", config={"epochs": 2, "batch_size": 32})


TASK_NETWORKS = {"detection": "fasterrcnn_mobilenet_v3_large_320_fpn", "segmentation": "lraspp_mobilenet_v3_large"}


def task_run(owner, task: str, labels: list[str], *, network: str | None = None, test_images: int = 0) -> Run:
    """A done run of `task` whose best checkpoint is the network's untrained weights (seeded),
    written as the trainer writes them (the trainer's own tests train them: tests/trainer/
    test_tasks.py); with `test_images`, its dataset folder holds a 32x32 test split of shapes."""
    import torch

    from tests.support.task_data import make_task_folder
    from trainer.checkpoint import CheckpointStore
    from trainer.networks import InputSpec
    from trainer.tasks import task_for

    network = network or TASK_NETWORKS[task]
    size = 32 if test_images else 64
    dataset = make_dataset_row(owner, name=task, labels=labels, task=task,
                                     image_width=size, image_height=size, channels=3)  # fmt: skip
    if test_images:
        shutil.rmtree(dataset.path, ignore_errors=True)
        make_task_folder(dataset.path, task=task, size=size, train=1, val=0, test=test_images)
        meta = json.loads((dataset.path / "dataset.json").read_text())
        Dataset.objects.filter(pk=dataset.pk).update(splits=meta["splits"], labels=meta["labels"])
        dataset.refresh_from_db()
    run = Run.objects.create(owner=owner, name=task, dataset=dataset, network=network, state=Run.State.DONE)
    torch.manual_seed(0)
    model = task_for(task).build_model(network, InputSpec(3, size, size, len(dataset.labels)))
    preprocessing = {"width": size, "height": size, "channels": 3, "resize_mode": "squash", "crop": None,
                     "input_shape": [3, size, size]}  # fmt: skip
    state = {"model": model.state_dict(), "config": {"network": network}, "labels": dataset.labels, "task": task,
             "preprocessing": preprocessing, "step": 1}  # fmt: skip
    shutil.rmtree(run.run_dir, ignore_errors=True)
    CheckpointStore(run.run_dir).save(state, step=1, is_best=True)
    return run


def val_images(run: Run, count: int = 10):
    """(uint8 H x W gray images, labels) from the run's dataset validation split."""
    from trainer.datum import DatumLMDB

    db = DatumLMDB(run.dataset.path / "val_db")
    items = [db[i] for i in range(count)]
    db.close()
    return [image[0] for image, _ in items], [label for _, label in items]


def digits_zip(path: Path, *, classes: int = 3, per_class: int = 30) -> tuple[Path, Path]:
    """A zip of class folders (0/, 1/, ...) of real 8x8 handwritten digits as PNGs, and one more
    digit image (not in the zip) to classify."""
    import zipfile

    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = np.clip(digits.images * 16, 0, 255).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = None
    with zipfile.ZipFile(path, "w") as zf:
        for label in range(classes):
            indices = np.flatnonzero(digits.target == label)
            for n, index in enumerate(indices[:per_class]):
                buffer = io.BytesIO()
                Image.fromarray(images[index]).save(buffer, format="PNG")
                zf.writestr(f"digits/{label}/{n}.png", buffer.getvalue())
            if label == 1:
                extra = path.parent / "digit.png"
                Image.fromarray(images[indices[per_class]]).save(extra)
    return path, extra
