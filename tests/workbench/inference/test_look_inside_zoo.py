"""Look inside a zoo network (timm's, trainer/zoo.py): a checkpoint the trainer wrote for
timm/resnet18d, shown through the API the page calls (workbench/inference/activations.py), and a
transformer's layer that its forward pass skips."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image

from tests.support.trainer_data import make_dataset_folder
from tests.workbench.inference.conftest import done_run
from trainer.config import config_from_dict
from trainer.networks import InputSpec, build_model
from trainer.run import train
from trainer.tasks.classification import Classifier
from workbench.inference.activations import look_inside
from workbench.runs.models import Run

pytestmark = pytest.mark.django_db

ZOO_NET = "timm/resnet18d"


@pytest.fixture(scope="module")
def zoo_trained(tmp_path_factory) -> dict:
    """timm/resnet18d trained by the real trainer for one epoch on 48 gray 8x8 images."""
    root = tmp_path_factory.mktemp("zoo")
    folder = make_dataset_folder(root / "ds", num_classes=3, size=8, channels=1, train=48, val=12)
    config = {"run_dir": str(root / "run"), "network": ZOO_NET, "devices": ["cpu"], "epochs": 1, "batch_size": 8,
              "data": {"dataset": str(folder), "num_workers": 0}}  # fmt: skip
    assert train(config_from_dict(config)) == 0
    return {"dataset": folder, "run_dir": root / "run", "meta": json.loads((folder / "dataset.json").read_text())}


@pytest.fixture
def zoo_run(zoo_trained, owner) -> Run:
    return done_run(zoo_trained, owner, name="zoo", network=ZOO_NET, config={"epochs": 1})


def png() -> SimpleUploadedFile:
    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (8, 8), dtype=np.uint8)).save(buffer, format="PNG")
    return SimpleUploadedFile("bars.png", buffer.getvalue(), content_type="image/png")


def test_it_looks_inside_a_zoo_network(owner_client, zoo_run):
    url = reverse("api-run-inside", args=[zoo_run.pk])
    body = owner_client.post(url, {"image": png()}).json()
    # timm's deep stem: three 3x3 convolutions, the first 32 filters on the gray channel.
    assert body["filters"]["shape"] == [32, 1, 3, 3] and body["filters"]["image"].startswith("data:image/png")
    assert body["chosen"] == ["conv1.0", "conv1.3", "conv1.6"]
    first = body["activations"][0]
    assert first["shape"] == [32, 4, 4] and first["shown_channels"] == 32 and first["image"].startswith("data:")
    names = {layer["name"] for layer in body["layers"]}
    assert {"layer1.0.conv1", "layer4.1.act2", "fc"} <= names
    assert len(body["predictions"]) == 3
    # The head: one value per class, named by class, drawn as bars.
    logits = owner_client.post(url, {"image": png(), "layers": "layer4.1.act2,fc"}).json()["activations"]
    assert logits[0]["shape"][0] == 512 and "image" in logits[0]
    assert logits[1]["labels"] == ["class_0", "class_1", "class_2"] and len(logits[1]["values"]) == 3


def test_it_says_why_a_transformers_skipped_layer_shows_nothing():
    # timm's ViT/DeiT compute attention fused and never call their attn_drop module: it is listed
    # (a Dropout is a leaf layer) but has no output; its entry says so instead of a picture.
    torch.manual_seed(0)
    model = build_model("timm/deit_tiny_patch16_224", InputSpec(3, 16, 16, 3))
    preprocessing = {"width": 16, "height": 16, "channels": 3, "resize_mode": "squash", "crop": None,
                     "input_shape": [3, 16, 16]}  # fmt: skip
    classifier = Classifier(model, ["a", "b", "c"], preprocessing, None)
    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8))
    body = look_inside(classifier, image, ["patch_embed.proj", "blocks.0.attn.attn_drop", "blocks.0.mlp.fc1"])
    embed, dropped, fc1 = body["activations"]
    assert embed["shape"] == [192, 1, 1] and fc1["shape"] == [2, 768]  # the class token and one patch
    assert dropped["error"].startswith("not reached: this network's forward pass does not call this layer")
    assert body["filters"]["shape"] == [192, 3, 16, 16]
