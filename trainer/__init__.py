"""The workbench's PyTorch training engine. Never imports Django; runnable as `python -m trainer`."""

__version__ = "0.1.0"
