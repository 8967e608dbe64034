"""Slurm's command line tools, read and driven for the Slurm executor (workbench/runs/slurm_*.py)
and the GPUs page. No model, no Django app: a thin layer over `commands.py`."""
