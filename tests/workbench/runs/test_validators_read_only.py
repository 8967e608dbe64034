"""Validators check and never write: validating a run that starts from each kind of weights
reference leaves every table's row count and the uploads' folder as they were, and the config it
returns holds the reference, never a path (the file is resolved at launch)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from django.conf import settings

from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from tests.support.rows import row_counts
from trainer.checkpoint import CheckpointStore
from trainer.networks import InputSpec, build_model
from workbench.runs.devices import DeviceRequest
from workbench.runs.services import run_create
from workbench.runs.validators import validate_trainer_config
from workbench.weights.models import StoredWeights
from workbench.weights.uploads import weights_upload

pytestmark = pytest.mark.django_db

SPEC = InputSpec(1, 8, 8, 3)


def files_under(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*")) if folder.is_dir() else []


@pytest.fixture
def references(owner, settings, tmp_path) -> list[str]:
    """One reference of each kind `owner` may start a lenet from."""
    state = io.BytesIO()
    torch.save(build_model("lenet", SPEC).state_dict(), state)
    state.seek(0)
    upload = weights_upload(owner=owner, name="mine.pt", chunks=state)
    settings.WEIGHTS_DIR = tmp_path / "store"
    settings.WEIGHTS_DIR.mkdir()
    (settings.WEIGHTS_DIR / "lenet.pt").write_bytes(upload.file.read_bytes())
    stored = StoredWeights.objects.create(network="lenet", source="local", file_name="lenet.pt",
                                          path=str(settings.WEIGHTS_DIR / "lenet.pt"))  # fmt: skip
    dataset = make_dataset_row(owner, name="source-data", status=Dataset.Status.BUILDING)
    run = run_create(owner=owner, dataset=dataset, name="source", network="lenet", config={},
                     device_request={"kind": "cpu"})  # fmt: skip
    store = CheckpointStore(run.run_dir)
    store.save({"model": build_model("lenet", SPEC).state_dict(), "config": {}}, step=5, is_best=True)
    store.save({"model": build_model("lenet", SPEC).state_dict(), "config": {}}, step=9)
    return [stored.reference, upload.reference, f"run:{run.pk}", f"run:{run.pk}:last", f"run:{run.pk}:5"]


def test_it_validates_every_kind_of_reference_writing_nothing(owner, references):
    before, files = row_counts(), files_under(Path(settings.DATA_DIR) / "pretrained")
    for reference in references:
        config = validate_trainer_config(
            {"pretrained": reference}, network="lenet", request=DeviceRequest.cpu(), owner=owner
        )
        assert config["pretrained"] == reference  # stored as sent: never a path
    assert row_counts() == before
    assert files_under(Path(settings.DATA_DIR) / "pretrained") == files
