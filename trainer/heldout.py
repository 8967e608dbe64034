"""Held-out predictions: after training, the final model's class probabilities of every
validation image, in the split's order, into `<run_dir>/heldout.npy` (float32, images x classes).

The data doctor's label check (docs/design.md, "Label errors") trains K runs, each on K-1 folds
of the data with the remaining fold as its validation split: each image is predicted by the one
model that never saw it, which is what confident learning needs. Classification only: a detector's
or segmenter's image has no one label to doubt.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from trainer import protocol
from trainer.atomic import atomic_write
from trainer.protocol import HELDOUT_FILE

log = logging.getLogger(__name__)


def save_heldout(run) -> Path | None:
    """Rank 0 writes the file (the other ranks return); None where there is nothing to predict."""
    if run.rank != 0 or run.data.val_loader is None or run.task.traits.targets_db:
        return None
    # The weights this validation's checkpoint holds: the average's when it was the better.
    model = run.ema.module if run.ema is not None and run.weights == protocol.AVERAGE else run.model_without_ddp
    model.eval()
    # The whole split in order, on this rank alone: the validation loader is sharded over ranks.
    dataset = run.task.dataset(run.info, "val", cfg=run.cfg, train=False)
    loader = DataLoader(dataset, batch_size=run.cfg.per_process_batch, shuffle=False, collate_fn=run.task.collate)
    chunks = []
    try:
        with torch.no_grad():
            for images, _ in loader:
                x = run.data.normalize(images.to(run.device, non_blocking=True))
                with run.autocast():
                    logits = model(x)
                chunks.append(torch.softmax(logits.float(), dim=1).cpu().numpy())
    finally:
        dataset.close()
    probabilities = np.concatenate(chunks).astype(np.float32)
    path = Path(run.cfg.run_dir) / HELDOUT_FILE
    atomic_write(path, lambda fh: np.save(fh, probabilities))
    log.info("held-out predictions of %d validation images written", len(probabilities))
    return path
