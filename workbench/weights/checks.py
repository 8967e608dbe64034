"""What a weights file must be before it is filed: a weights file by the trainer's one reader
(trainer/weights_file.py: tensors only, complete, within the inflate limits), and the network's
own (every tensor of the network built with weights=None, but its classifier, is in the file with
the same shape). Each refusal is one line that names the file by its name."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from trainer.networks import InputSpec
from trainer.protocol import task_of_network
from trainer.tasks import task_for
from trainer.weights_file import WeightsFileError, read_state_dict
from workbench.weights.files import WeightsError


def load_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """The file's state_dict through the trainer's one reader (format by content, the inflate
    limits, tensors only, prefixes stripped); its refusal as the store's WeightsError."""
    try:
        return read_state_dict(path)
    except WeightsFileError as error:
        raise WeightsError(str(error)) from None


def _shapes(network: str, num_classes: int) -> dict[str, torch.Size]:
    """`network`'s tensors built with weights=None at 224x224 (the published weights' size), on
    the meta device: shapes only, no memory, no initialisation cost."""
    task = task_for(task_of_network(network))
    with torch.device("meta"):
        model: nn.Module = task.build_model(network, InputSpec(3, 224, 224, num_classes))
    return {name: tensor.shape for name, tensor in model.state_dict().items()}


def check_network(path: Path, network: str) -> int:
    """Raises WeightsError unless `path` holds `network`'s weights; returns its tensor count.
    The head (whatever is sized by the classes: a classifier, a detector's box predictor, a
    segmentation head) is replaced when fine-tuning, so any shape of it is fine."""
    state = load_state_dict(path)
    own, other = _shapes(network, 1000), _shapes(network, 3)
    head = {name for name, shape in own.items() if other.get(name) != shape}
    for name, shape in own.items():
        theirs = state.get(name)
        if name in head or theirs is None or theirs.shape == shape:
            continue
        raise WeightsError(
            f"{path.name} is not {network}'s weights: {name} is {tuple(theirs.shape)} in the file, "
            f"{tuple(shape)} in {network}"
        )
    # BatchNorm's step counters are absent from older published files; torch adds them on load.
    missing = [n for n in own if n not in state and n not in head and not n.endswith("num_batches_tracked")]
    if missing:
        raise WeightsError(
            f"{path.name} is not {network}'s weights: it lacks {len(missing)} of {network}'s {len(own)} tensors "
            f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})"
        )
    return len(state)
