"""Published reference numbers a benchmark page shows beside the matching cells, each with its
source. Only numbers somebody measured and published, copied from the page cited; none of them
was measured here, and the page says so.

NVIDIA DeepLearningExamples, ResNet-50 v1.5 for PyTorch, README "Training performance: NVIDIA
DGX A100 (8x A100 80GB)" (pytorch-21.03 NGC container, real ImageNet data): TF32 938 img/s on 1
GPU and 7,248 on 8; mixed precision (AMP, fp16 autocast) 2,470 on 1 and 16,621 on 8.
"""

from __future__ import annotations

DLE_RESNET50 = {
    "source": "NVIDIA DeepLearningExamples, ResNet-50 v1.5 for PyTorch: training performance on "
    "DGX A100 (8x A100 80GB), pytorch-21.03 NGC container, ImageNet",
    "url": "https://github.com/NVIDIA/DeepLearningExamples/tree/master/PyTorch/Classification/ConvNets/resnet50v1.5",
}

# What a cell must be for the number to stand beside it: network, image side, mode, precision,
# GPU count. fp32 here is TF32 there: PyTorch runs fp32 convolutions on A100 tensor cores as TF32.
REFERENCES = [
    {"network": "resnet50", "image_size": 224, "mode": "train", "precision": precision, "gpus": gpus,
     "images_per_sec": value, "hardware": f"{gpus} x A100-80GB", "setting": setting, **DLE_RESNET50}
    for precision, setting, gpus, value in (
        ("fp32", "TF32", 1, 938),
        ("fp32", "TF32", 8, 7248),
        ("fp16", "mixed precision (AMP, fp16)", 1, 2470),
        ("fp16", "mixed precision (AMP, fp16)", 8, 16621),
    )
]  # fmt: skip


def references_for(request: dict) -> list[dict]:
    """The published numbers that may stand beside this benchmark's cells: its image side,
    networks, precision and modes; the page puts each under its GPU count in the matching table."""
    return [
        reference
        for reference in REFERENCES
        if reference["image_size"] == request.get("image_size")
        and reference["network"] in (request.get("networks") or [])
        and reference["precision"] == request.get("precision")
        and reference["mode"] in (request.get("modes") or [])
    ]


def reference_rows(request: dict, table: dict) -> list[dict]:
    """Those that match a table (network, precision, mode) and one of its GPU counts."""
    return [
        reference
        for reference in references_for(request)
        if all(reference[key] == table[key] for key in ("network", "precision", "mode"))
        and reference["gpus"] in table["gpus"]
    ]
