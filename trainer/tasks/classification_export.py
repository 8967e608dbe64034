"""A classifier's exports (trainer/export.py writes them; this says what differs for classification):
the README with plain-PyTorch code that rebuilds the network, TorchScript traced and ONNX made
portable (adaptive pools at a fixed size), both checked against PyTorch on normalised images.

The exported models take the normalised input (mean subtracted, divided by 255 and by the
weights' std when trained with it) and give logits.
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from trainer.tasks.classification import Classifier
from trainer.zoo import is_timm, timm_name, zoo_entry

README = """This folder is a model trained by the workbench ({network}, {num_classes} classes).

Files: model.safetensors (weights), labels.txt (class i on line i+1), preprocessing.json,
config.json (the training config), mean.npy (the mean subtracted from inputs, if any; with
pretrained weights' normalisation, preprocessing.json's "std" divides the result after the 1/255),
model.torchscript.pt / model.onnx when exported.

Preprocessing ({channels} channel(s)): resize the image to {width}x{height} ("{resize_mode}"),
{crop_text}convert to a float tensor C x H x W with values 0..255, subtract mean.npy (broadcast),
divide by 255. The model outputs logits; apply softmax for probabilities.

With the workbench installed:

    from trainer.inference import load_bundle
    from PIL import Image
    classifier = load_bundle("{folder}")  # this folder, where the zip was unpacked
    print(classifier.classify([Image.open("cat.jpg")], top_k=5))

With plain PyTorch (torch, numpy, Pillow{extra_packages}), from this folder:

    import json, numpy as np, torch
    from PIL import Image
{load_model}
    model.eval()
    pre = json.load(open("preprocessing.json"))
    labels = open("labels.txt").read().splitlines()
    image = Image.open("cat.jpg").convert("{pil_mode}").resize((pre["width"], pre["height"]), Image.BILINEAR)
    x = torch.from_numpy(np.asarray(image, dtype=np.float32).reshape(pre["height"], pre["width"], -1))
    x = x.permute(2, 0, 1)
    if pre["crop"]:
        top, left = (x.shape[1] - pre["crop"]) // 2, (x.shape[2] - pre["crop"]) // 2
        x = x[:, top:top + pre["crop"], left:left + pre["crop"]]
    if pre["mean"] != "none":
        x = x - torch.from_numpy(np.load("mean.npy"))
    x = x / 255
    if pre.get("std"):
        x = x / torch.tensor(pre["std"]).view(-1, 1, 1)
    with torch.no_grad():
        probs = torch.softmax(model(x.unsqueeze(0)), dim=1)[0]
    print([(labels[i], float(probs[i])) for i in probs.topk(min(5, len(labels))).indices])

{resize_note}"""

_TORCHVISION_LOAD = """    import torchvision
    from safetensors.torch import load_file
    model = torchvision.models.get_model("{network}", weights=None, num_classes={num_classes}{extra_kwargs})
{stem}    model.load_state_dict(load_file("model.safetensors"))"""

_TIMM_LOAD = """    import timm
    from safetensors.torch import load_file
    model = timm.create_model("{name}", pretrained=False, num_classes={num_classes}, in_chans={channels}{extra_kwargs})
    model.load_state_dict(load_file("model.safetensors"))"""

_TORCHSCRIPT_LOAD = """    # {network} is the workbench's own definition: load the traced model (TorchScript export)
    model = torch.jit.load("model.torchscript.pt")"""


def _load_code(network: str, num_classes: int, pre: dict[str, Any]) -> tuple[str, str]:
    """Plain-PyTorch code that rebuilds the model: torchvision nets from their builder, the others
    from the TorchScript file."""
    if network in ("lenet", "custom"):
        return _TORCHSCRIPT_LOAD.format(network=network), ""
    if is_timm(network):
        # The zoo's transformers are built for the trained size (their position embeddings).
        size = tuple(pre["input_shape"][1:])
        extra = f", img_size={size}" if zoo_entry(network).multiple > 1 else ""
        load = _TIMM_LOAD.format(
            name=timm_name(network), num_classes=num_classes, channels=pre["channels"], extra_kwargs=extra
        )
        return load, ", timm, safetensors"
    extra = {
        "googlenet": ", aux_logits=False, init_weights=False",
        "vit_b_16": f", image_size={pre['input_shape'][1]}",
    }.get(network, "")
    stem = ""
    if pre["channels"] == 1:
        stem = (
            "    # 1-channel data: the first convolution takes 1 input channel\n"
            "    name, conv = next((n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Conv2d))\n"
            "    parent = model.get_submodule(name.rpartition('.')[0])\n"
            "    setattr(parent, name.rpartition('.')[2], torch.nn.Conv2d(1, conv.out_channels, conv.kernel_size,"
            " conv.stride, conv.padding, conv.dilation, 1, conv.bias is not None))\n"
        )
    return (
        _TORCHVISION_LOAD.format(network=network, num_classes=num_classes, extra_kwargs=extra, stem=stem),
        ", torchvision, safetensors",
    )


def examples(classifier: Classifier, images: np.ndarray | None) -> torch.Tensor:
    """The normalised input: `images` (uint8 N x C x H x W, cropped as trained) or a seeded random
    image and its mirror (two, so the batch axis is exercised)."""
    if images is None or not len(images):
        c, h, w = classifier.preprocessing["input_shape"]
        gen = torch.Generator().manual_seed(0)
        raw = torch.randint(0, 256, (1, c, h, w), generator=gen, dtype=torch.uint8)
        raw = torch.cat([raw, raw.flip(-1)])
    else:
        raw = torch.from_numpy(np.ascontiguousarray(images))
    return classifier.normalize(raw.to(classifier.device))


def bundle_arrays(classifier: Classifier) -> dict[str, np.ndarray]:
    mean = classifier.normalize.mean
    return {} if mean is None else {"mean.npy": mean.cpu().numpy()}


def readme(classifier: Classifier, config: dict[str, Any], formats: tuple[str, ...], folder: str) -> str:
    pre = classifier.preprocessing
    load_model, extra_packages = _load_code(config["network"], len(classifier.labels), pre)
    text = README.format(
        network=config["network"],
        num_classes=len(classifier.labels),
        channels=pre["channels"],
        width=pre["width"],
        height=pre["height"],
        resize_mode=pre["resize_mode"],
        crop_text=f"centre-crop to {pre['crop']}x{pre['crop']}, " if pre.get("crop") else "",
        folder=folder,
        load_model=load_model,
        extra_packages=extra_packages,
        pil_mode="L" if pre["channels"] == 1 else "RGB",
        resize_note=""
        if pre["resize_mode"] == "squash"
        else f'\nThe resize above squashes; this model was trained with "{pre["resize_mode"]}" '
        "(trainer.preprocess.resize_image does it as the workbench did).\n",
    )
    # The README says how to use the files this export holds, and no file it does not hold.
    if "torchscript" not in formats:
        text = text.replace(
            'model = torch.jit.load("model.torchscript.pt")',
            'model = torch.jit.load("model.torchscript.pt")  # from the TorchScript download; not in this one',
        )
    return text + (_ONNX_USE if "onnx" in formats else "")


def torchscript(classifier: Classifier, x: torch.Tensor, path: Path) -> dict[str, Any]:
    model = classifier.model.eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # jit.trace is deprecated, still the portable format
        traced = torch.jit.trace(model, x[:1])
        got, want = traced(x), model(x)
        if not torch.allclose(got, want, atol=1e-4, rtol=1e-4):
            raise RuntimeError("TorchScript export does not reproduce the model's outputs")
    traced.save(str(path))
    return {"images": len(x), "compared": len(x), "max_abs_diff": float((got - want).abs().max())}


def onnx(classifier: Classifier, x: torch.Tensor, path: Path, *, network: str = "") -> dict[str, Any]:
    """Export with a dynamic batch axis and verify with onnxruntime: same top-1, close logits."""
    import onnxruntime as ort  # large: only to check an export

    model = classifier.model.eval()
    portable = onnx_ready(model, x[:1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The TorchScript-based exporter: fast and dependable for these convnets/ViT; the dynamo
        # exporter takes minutes on the CPU for the larger networks.
        torch.onnx.export(
            portable,
            (x[:1],),
            str(path),
            input_names=["input"],
            output_names=["logits"],
            dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x.cpu().numpy()})[0]
    with torch.no_grad():
        want = model(x).float().cpu().numpy()
    scale = float(np.abs(want).max())
    report = {
        "images": len(x),
        "compared": len(x),
        "max_abs_diff": float(np.abs(got - want).max()),
        "logit_scale": scale,
        "same_top1": bool((got.argmax(1) == want.argmax(1)).all()),
    }
    if not report["same_top1"] or report["max_abs_diff"] > 1e-4 + 1e-3 * scale:
        raise RuntimeError(f"ONNX export disagrees with PyTorch on the test input: {report}")
    return report


class FixedAdaptiveAvgPool2d(nn.Module):
    """`adaptive_avg_pool2d` for one input size, as two products with averaging matrices.

    ONNX has only a global or fixed-window average pool, so PyTorch refuses to export an
    adaptive pool whose output size does not divide its input size (LeNet on 32x32: 8x8 -> 7x7,
    VGG-16 on 32x32: 1x1 -> 7x7). The sizes are known when exporting, and adaptive average
    pooling is linear: out = Rows @ x @ Cols^T, with PyTorch's own bins
    (floor(i * in / out) to ceil((i + 1) * in / out)).
    """

    def __init__(self, in_size: tuple[int, int], out_size: tuple[int, int]) -> None:
        super().__init__()
        self.register_buffer("rows", _bins(in_size[0], out_size[0]))
        self.register_buffer("cols", _bins(in_size[1], out_size[1]).t().contiguous())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rows.to(x.dtype) @ x @ self.cols.to(x.dtype)


def _bins(size: int, out: int) -> torch.Tensor:
    weights = torch.zeros(out, size)
    for i in range(out):
        start, end = (i * size) // out, -(-(i + 1) * size // out)
        weights[i, start:end] = 1.0 / (end - start)
    return weights


def onnx_ready(model: nn.Module, example: torch.Tensor) -> nn.Module:
    """A copy of `model` that ONNX can hold at the example's size: every adaptive average pool
    whose output does not divide its input becomes a FixedAdaptiveAvgPool2d (same numbers)."""
    sizes: dict[str, tuple[int, int]] = {}

    def record(name: str) -> Any:
        def hook(_module: nn.Module, args: tuple) -> None:  # returns None: the input is left as it is
            sizes.setdefault(name, tuple(args[0].shape[-2:]))

        return hook

    hooks = [
        module.register_forward_pre_hook(record(name))
        for name, module in model.named_modules()
        if isinstance(module, nn.AdaptiveAvgPool2d)
    ]
    try:
        with torch.no_grad():
            model(example)
    finally:
        for hook in hooks:
            hook.remove()
    portable = copy.deepcopy(model)
    for name, (height, width) in sizes.items():
        pool = portable.get_submodule(name)
        out = pool.output_size if isinstance(pool.output_size, tuple) else (pool.output_size, pool.output_size)
        out_h, out_w = (height if out[0] is None else out[0]), (width if out[1] is None else out[1])
        if height % out_h or width % out_w:
            parent, _, child = name.rpartition(".")
            setattr(portable.get_submodule(parent), child, FixedAdaptiveAvgPool2d((height, width), (out_h, out_w)))
    return portable.eval()


_ONNX_USE = """
With onnxruntime (numpy, Pillow, onnxruntime), from this folder: prepare x as above (a numpy
array of shape 1 x C x H x W, float32, already divided by 255), then

    import onnxruntime as ort
    session = ort.InferenceSession("model.onnx")
    logits = session.run(None, {session.get_inputs()[0].name: x})[0]
"""


ONNX_FILE_LIMIT = 2 * 1024**3  # protobuf's limit on one message: bigger weights go in files beside it
OWN_NETWORKS = ("lenet", "custom")  # not in torchvision: plain PyTorch cannot rebuild them from weights


def format_notes(network: str, input_shape: tuple[int, int, int], parameters: int = 0) -> dict[str, dict[str, Any]]:
    """What each export format holds for this network, in plain words, before anyone asks for it:
    {format: {"available": bool, "note": str}}. An unavailable format names the reason."""
    c, h, w = input_shape
    size = f"{c}×{h}×{w}"
    weights = parameters * 4
    if network in OWN_NETWORKS:
        bundle = (
            f"The weights alone: {network} is the workbench's own network, so plain PyTorch cannot rebuild it "
            "from them; loading this zip needs the workbench installed. Choose TorchScript or ONNX for a file "
            "that holds the whole network."
        )
    elif is_timm(network):
        bundle = f"The weights, loaded in plain PyTorch with timm's {timm_name(network)} (the README shows how)."
    else:
        bundle = f"The weights, loaded in plain PyTorch with torchvision's {network} builder (the README shows how)."
    onnx = f"The whole network (opset 17) for {size} images and any batch size, checked with onnxruntime."
    if weights > ONNX_FILE_LIMIT:
        onnx += (
            f" Its weights ({weights / 1024**3:.1f} GB) are over the 2 GB an ONNX file can hold, so they come "
            "in files beside model.onnx; keep them in the same folder."
        )
    return {
        "bundle": {"available": True, "note": bundle},
        "torchscript": {
            "available": True,
            "note": f"The whole network, traced for {size} images and any batch size "
            "(torch.jit.load, or libtorch in C++).",
        },
        "onnx": {"available": True, "note": onnx},
    }
