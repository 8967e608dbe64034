"""Where a run's attempts run, behind one interface: `local` (the workbench's own queue and
workers) and `slurm` (a batch job per attempt). The executor string is switched on here only;
the executors share the attempt code (workbench/runs/attempts/) and never import each other."""

from __future__ import annotations

from typing import Protocol

from workbench.runs.devices import DeviceRequest
from workbench.runs.executors.local import LocalExecutor
from workbench.runs.executors.slurm import SlurmExecutor
from workbench.runs.models import Run


class Executor(Protocol):
    name: str
    submitted_words: str  # the run's first timeline entry
    has_gpus_for_auto: bool  # whether "auto" devices may mean one GPU without asking the workers

    def holds(self, run: Run) -> bool:
        """Whether a trainer or job of the run is out there, so that a stop must be asked of it
        (it stops with a checkpoint) rather than carried out on the row at once."""
        ...

    def placement_preview(self, *, user, request: DeviceRequest, nodes: int) -> dict:
        """The new-run form's words on where and when a run asking for `request` would start."""
        ...


EXECUTORS: dict[str, Executor] = {Run.Executor.LOCAL: LocalExecutor(), Run.Executor.SLURM: SlurmExecutor()}


def executor_named(name: str) -> Executor:
    try:
        return EXECUTORS[name]
    except KeyError:
        raise ValueError(f"unknown executor {name!r}; known: {', '.join(EXECUTORS)}") from None


def executor_for(run: Run) -> Executor:
    return executor_named(run.executor)
