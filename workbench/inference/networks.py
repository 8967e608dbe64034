"""A network's picture (its graph of layers with output shapes and parameter counts) and what each
export format holds for it, for the new-run page (a network not trained yet), the run page and the
download page. Computed with torch on the meta device (no memory, no compute), cached per shape.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from datasets.models import Dataset
from trainer.protocol import CLASSIFICATION
from workbench.core.errors import RequestError
from workbench.core.task_table import task_row
from workbench.runs.models import Run


@dataclass(frozen=True)
class NetworkInput:
    network: str
    channels: int
    height: int
    width: int
    classes: int
    layers: str = "[]"  # the custom network's layers as JSON text (hashable, for the cache)
    task: str = CLASSIFICATION  # the dataset's: a detector's or segmentation network's graph is not drawn

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.channels, self.height, self.width)


def input_for(*, network: str, dataset: Dataset, crop_size: int | None, custom_layers: list | None) -> NetworkInput:
    """The input a run of `network` on `dataset` trains on (a centre crop when it crops)."""
    side = crop_size if crop_size and crop_size > 0 else None
    return NetworkInput(
        network=network,
        channels=dataset.channels,
        height=side or dataset.image_height,
        width=side or dataset.image_width,
        classes=max(1, len(dataset.labels or [])),
        layers=json.dumps(custom_layers or [], sort_keys=True),
        task=dataset.task,
    )


def input_of_run(run: Run) -> NetworkInput:
    config = run.config or {}
    return input_for(
        network=run.network,
        dataset=run.dataset,
        crop_size=(config.get("data") or {}).get("crop_size"),
        custom_layers=config.get("custom_layers"),
    )


@functools.lru_cache(maxsize=64)
def graph_of(spec: NetworkInput) -> dict:
    """The graph (trainer.netgraph.network_graph); RequestError names what the network cannot take."""
    # torch (with the trainer) is loaded on the first such request, not by every web process
    from trainer.custom_net import CustomNetError  # torch: loaded only where this runs
    from trainer.netgraph import network_graph  # torch: loaded only where this runs
    from trainer.networks import InputSpec, NetworkError, check_input_size  # torch: loaded only where this runs

    if not task_row(spec.task).drawn:
        # Said, not failed: asked as a classifier, the answer was a 400 listing every classifier
        # (torch.fx cannot trace the box and mask heads, whose flow depends on the data).
        why = "detection and segmentation networks are not drawn: their heads cannot be traced layer by layer"
        return {"network": spec.network, "not_drawn": f"No graph: {why}."}
    field = "custom_layers" if spec.network == "custom" else "network"
    layers = json.loads(spec.layers)
    if spec.network == "custom" and not layers:
        raise RequestError("custom_layers", "add at least one layer, ending with a linear layer")
    trainer_spec = InputSpec(spec.channels, spec.height, spec.width, spec.classes, layers)
    try:
        check_input_size(spec.network, trainer_spec)
        return network_graph(spec.network, trainer_spec)
    except (NetworkError, CustomNetError) as error:
        raise RequestError(field, str(error)) from None


@functools.lru_cache(maxsize=64)
def _parameters(spec: NetworkInput) -> int:
    # torch (with the trainer) is loaded on the first such request, not by every web process
    import torch  # torch: loaded only where this runs

    from trainer.networks import InputSpec, build_model  # torch: loaded only where this runs

    with torch.device("meta"):
        model = build_model(spec.network, InputSpec(*spec.shape, spec.classes, json.loads(spec.layers)))
    return sum(p.numel() for p in model.parameters())


def export_notes(*, run: Run) -> dict[str, dict]:
    """{format: {available, note}} for the run's network, said on the download page beforehand."""
    # torch (with the trainer) is loaded on the first such request, not by every web process
    from trainer.export import format_notes  # torch: loaded only where this runs

    spec = input_of_run(run)
    try:
        # The size of the weights says whether ONNX holds them in one file; only drawn networks
        # are built here (a detector's or segmenter's notes do not depend on it).
        parameters = _parameters(spec) if task_row(spec.task).drawn else 0
    except ValueError:  # a network that cannot be built any more: the export will say why
        parameters = 0
    return format_notes(spec.task, spec.network, spec.shape, parameters)
