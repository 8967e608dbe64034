"""Where a run's attempts run, behind one interface: `local` (the workbench's own queue and
workers) and `slurm` (a batch job per attempt). The executor string is switched on here only;
the executors share the attempt code (workbench/runs/attempts/) and never import each other."""

from __future__ import annotations

from typing import Any, Protocol

from trainer.config import shown
from workbench.core.errors import RequestError
from workbench.runs.devices import DeviceRequest
from workbench.runs.executors.local import LocalExecutor
from workbench.runs.executors.slurm import SlurmExecutor
from workbench.runs.models import Run
from workbench.runs.validators import check_nodes


class Executor(Protocol):
    name: str
    submitted_words: str  # the run's first timeline entry
    has_gpus_for_auto: bool  # whether "auto" devices may mean one GPU without asking the workers
    # Whether the memory of the devices a run will get is known before it starts (the workers'
    # inventory), so that a custom network can be checked against it on submit.
    knows_device_memory: bool

    def check_request(self, *, request: DeviceRequest, nodes: int) -> None:
        """Refuses (RequestError naming the field) what this executor cannot run."""
        ...

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


def check_executor(executor: Any, nodes: Any, request: DeviceRequest) -> tuple[str, int]:
    """Where the run goes ("local" when not said) over how many nodes, `request` being the devices
    per node: one rule for the form, its previews, the API and the CLI. Returns both, checked."""
    name = Run.Executor.LOCAL if executor in (None, "") else executor
    if name not in EXECUTORS:
        raise RequestError("executor", f"{shown(name)} is not one of {', '.join(EXECUTORS)}")
    nodes = check_nodes(nodes)
    EXECUTORS[name].check_request(request=request, nodes=nodes)
    return name, nodes


def executor_for(run: Run) -> Executor:
    return executor_named(run.executor)
