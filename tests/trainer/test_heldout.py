"""Held-out predictions (trainer/heldout.py): after training, one row of class probabilities per
validation image, in the split's order, from the weights the last checkpoint holds."""

from __future__ import annotations

import numpy as np
import torch

from tests.trainer.conftest import make_config
from trainer.checkpoint import CheckpointStore
from trainer.data import LMDBImageDataset
from trainer.datum import DatumLMDB
from trainer.events import ListReporter
from trainer.networks import InputSpec, build_model
from trainer.protocol import EXIT_DONE, HELDOUT_FILE
from trainer.run import train


def test_it_writes_the_final_models_probabilities_of_every_validation_image_in_order(tmp_path, gray8):
    cfg = make_config(tmp_path / "run", gray8, epochs=1, heldout_predictions=True)
    assert train(cfg, reporter=ListReporter()) == EXIT_DONE
    predicted = np.load(tmp_path / "run" / HELDOUT_FILE)
    assert predicted.shape == (12, 3) and predicted.dtype == np.float32
    assert np.allclose(predicted.sum(axis=1), 1.0, atol=1e-5)
    # The same numbers as the last checkpoint's model on the validation images, one by one.
    model = build_model("lenet", InputSpec(1, 8, 8, 3, []))
    latest = CheckpointStore(tmp_path / "run").latest()
    model.load_state_dict(torch.load(latest, weights_only=True)["model"])
    model.eval()
    mean = torch.from_numpy(np.load(gray8 / "mean.npy"))
    db = DatumLMDB(gray8 / "val_db")
    try:
        images = torch.stack([image for image, _ in LMDBImageDataset(db)]).float()
    finally:
        db.close()
    with torch.no_grad():
        expected = torch.softmax(model((images - mean) / 255), dim=1).numpy()
    assert np.allclose(predicted, expected, atol=1e-4)
