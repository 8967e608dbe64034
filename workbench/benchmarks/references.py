"""Published reference numbers a benchmark page may show beside its own, each with its source.
Only numbers somebody measured and published; none of them was measured here."""

REFERENCES = [
    {
        "network": "resnet50",
        "precision": "bf16",
        "gpus": 1,
        "images_per_sec": 2470,
        "hardware": "1 x A100-80GB",
        "source": "NVIDIA DeepLearningExamples, ResNet-50 v1.5 PyTorch, AMP training",
    },
    {
        "network": "resnet50",
        "precision": "bf16",
        "gpus": 8,
        "images_per_sec": 16621,
        "hardware": "8 x A100-80GB",
        "source": "NVIDIA DeepLearningExamples, ResNet-50 v1.5 PyTorch, AMP training",
    },
]
