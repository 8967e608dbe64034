import uuid
from pathlib import Path

import pytest
import torch
import torchvision

from workbench.weights.services import weights_import


@pytest.fixture
def store(settings, tmp_path):
    """The store's folder and torchvision's cache, private to the test. The store's folder lies
    under the data dir's weights/ folder, where a live server's (a process of its own, with the
    default settings) finds the filed files in its own store (StoredWeights.present)."""
    settings.WEIGHTS_DIR = Path(settings.DATA_DIR) / "weights" / uuid.uuid4().hex
    settings.TORCH_HUB_CHECKPOINTS = tmp_path / "torch" / "hub" / "checkpoints"
    settings.HF_HUB_CACHE = tmp_path / "huggingface" / "hub"
    return settings


@pytest.fixture(scope="session")
def mobilenet_file(tmp_path_factory):
    """A lab's own mobilenet_v3_small weights (ImageNet's 1000 classes): a state_dict of a
    weights=None build, the smallest network of the store's."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("lab") / "lab-mobilenet.pth"
    torch.save(torchvision.models.mobilenet_v3_small(weights=None).state_dict(), path)
    return path


@pytest.fixture
def lab_weights(store, mobilenet_file, staff_user):
    row, _ = weights_import(source=mobilenet_file, network="mobilenet_v3_small", tag="lab", created_by=staff_user)
    # As if its library published its normalisation (a verified file's metadata).
    row.mean, row.std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    row.save()
    return row
