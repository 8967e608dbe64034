"""Every network the run form accepts exports to TorchScript and ONNX that agree with PyTorch, at
its smallest accepted size (grey images), at 32x32 (colour), and at 224x224 where that size
changes what is exported (AlexNet's).

Random weights, batch 1 for the export and batch 2 for the checks (the batch axis is free), on
the CPU; the weights are re-drawn so the logits are far from zero and the comparison means
something (several torchvision heads start at zero or near it).
"""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch import nn

from trainer.custom_net import CustomNetError
from trainer.export import export_onnx, export_torchscript
from trainer.networks import BUILDERS, InputSpec, NetworkError, build_model, check_input_size
from trainer.tasks.classification import Classifier
from trainer.zoo import is_timm

CUSTOM = [
    {"type": "conv2d", "out_channels": 8, "kernel_size": 3, "padding": 1},
    {"type": "batch_norm"},
    {"type": "relu"},
    {"type": "max_pool", "kernel_size": 2},
    {"type": "adaptive_avg_pool", "output_size": 3},
    {"type": "flatten"},
    {"type": "linear"},
]
# The smallest square side each network accepts (checked against check_input_size below).
SMALLEST = {
    "lenet": 4,
    "alexnet": 63,
    "googlenet": 15,
    "resnet18": 1,
    "resnet34": 1,
    "resnet50": 1,
    "vgg16": 32,
    "mobilenet_v3_small": 1,
    "mobilenet_v3_large": 1,
    "efficientnet_b0": 1,
    "vit_b_16": 16,
    "custom": 2,
}
CLASSES = 4


# Not exported here: VGG-16's layers are AlexNet's kinds (convolutions, max pools, an adaptive
# pool, dropout, linear), and its one cell wrote 528 MB of weights twice (16 s of the suite) to
# check nothing AlexNet's cells do not. Its smallest size is still checked, by
# test_it_knows_the_smallest_size_each_network_accepts.
NOT_EXPORTED = {"vgg16"}


def _cells():
    for name, low in SMALLEST.items():
        if name in NOT_EXPORTED:
            continue
        yield pytest.param(name, low, 1, id=f"{name}-{low}px-grey")
        # ViT is built for the image's patch grid (its position embeddings are made for it): the
        # 1x1 grid of its smallest side is exported; a 2x2 or the 14x14 of 224 exports the same
        # graph with a longer embedding table, and cost 15 s of the suite each (86 M weights).
        if low < 32 and name != "vit_b_16":
            yield pytest.param(name, 32, 3, id=f"{name}-32px")
        # At 224x224 only where the size changes what is exported: AlexNet's features reach its
        # pool at 6x6 only there. The others' adaptive pools fix what their classifiers see, so a
        # 224 cell of theirs (about a minute of the suite for all of them) checks nothing the
        # 32x32 one does not.
        if name == "alexnet":
            yield pytest.param(name, 224, 3, id=f"{name}-224px", marks=pytest.mark.slow)


def _spec(name: str, side: int, channels: int) -> InputSpec:
    return InputSpec(channels, side, side, CLASSES, CUSTOM if name == "custom" else [])


def _redraw(model: nn.Module) -> None:
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Conv2d | nn.Linear):
                fan_in = module.weight[0].numel()
                module.weight.copy_(torch.randn(module.weight.shape, generator=gen) * (2 / fan_in) ** 0.5)
                if module.bias is not None:
                    module.bias.uniform_(-0.1, 0.1, generator=gen)
            elif isinstance(module, nn.BatchNorm2d | nn.BatchNorm1d):
                module.running_mean.uniform_(-0.1, 0.1, generator=gen)
                module.running_var.uniform_(0.5, 1.5, generator=gen)


def _classifier(name: str, side: int, channels: int) -> Classifier:
    torch.manual_seed(0)
    model = build_model(name, _spec(name, side, channels))
    _redraw(model)
    pre = {
        "width": side,
        "height": side,
        "channels": channels,
        "resize_mode": "squash",
        "crop": None,
        "mean": "none",
        "scale": 1 / 255,
        "input_shape": [channels, side, side],
    }
    return Classifier(model, [f"class{i}" for i in range(CLASSES)], pre, None)


def _assert_agree(got: np.ndarray, want: np.ndarray, what: str) -> None:
    scale = float(np.abs(want).max())
    assert scale > 1e-3, f"{what}: logits {scale} too close to zero to compare"
    assert got.shape == want.shape
    assert float(np.abs(got - want).max()) <= 1e-3 * scale + 1e-5, f"{what}: logits differ"
    assert (got.argmax(1) == want.argmax(1)).all(), f"{what}: top-1 differs"


@pytest.mark.parametrize("name", list(SMALLEST))
def test_it_knows_the_smallest_size_each_network_accepts(name):
    low = SMALLEST[name]
    check_input_size(name, _spec(name, low, 1))
    if low > 1:
        with pytest.raises((NetworkError, CustomNetError)):
            check_input_size(name, _spec(name, low - 1, 1))


def test_it_covers_every_network_of_the_form():
    # The timm zoo's networks export through the same code; tests/trainer/test_zoo.py exports one.
    assert set(SMALLEST) == {name for name in BUILDERS if not is_timm(name)}


@pytest.mark.parametrize(("name", "side", "channels"), list(_cells()))
def test_it_exports_torchscript_and_onnx_that_agree_with_pytorch(tmp_path, name, side, channels):
    torch.set_num_threads(2)
    check_input_size(name, _spec(name, side, channels))  # the form accepts this cell
    classifier = _classifier(name, side, channels)
    gen = torch.Generator().manual_seed(1)
    batch = torch.rand(2, channels, side, side, generator=gen) * 2 - 1
    with torch.no_grad():
        want = classifier.model(batch).numpy()

    export_torchscript(classifier, tmp_path / "model.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        traced = torch.jit.load(str(tmp_path / "model.pt"))
    with torch.no_grad():
        _assert_agree(traced(batch).numpy(), want, "torchscript")

    report = export_onnx(classifier, tmp_path / "model.onnx")
    assert report["same_top1"]
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    _assert_agree(session.run(None, {"input": batch.numpy()})[0], want, "onnx")
