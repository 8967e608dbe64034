"""What a user asks of runs: submit (one run or a sweep), abort, pause, resume, delete.

Each checks the request (validators), changes rows through the lifecycle (lifecycle.py) and
queues the work on commit: a scheduling pass (tasks.schedule_runs). Imports run one way,
services -> tasks -> scheduler -> executors -> attempts -> lifecycle: what the tasks execute never
imports this module.
"""

from __future__ import annotations

import copy
import logging
import shutil
import uuid

from django.db import transaction
from django.utils import timezone

from datasets.models import Dataset, DatasetVersion
from datasets.validators import version_to_train_on
from datasets.versions import latest_version
from trainer import protocol
from workbench.audit import services as audit
from workbench.core.errors import RequestError
from workbench.projects.selectors import project_of_new_work
from workbench.projects.validators import project_to_put_into
from workbench.runs.devices import DeviceRequest
from workbench.runs.executors import check_executor, executor_for, executor_named
from workbench.runs.lifecycle import run_events_append, run_finish, run_transition
from workbench.runs.models import Run, RunTransition
from workbench.runs.network_fit import check_network_fits, sweep_fits
from workbench.runs.tasks import schedule_runs
from workbench.runs.validators import SWEEP_FIELDS, parse_device_request, sweep_validate, validate_trainer_config
from workbench.workers.inventory import gpus_online

log = logging.getLogger(__name__)


def queue_scheduling() -> None:
    try:
        schedule_runs.delay()
    except Exception:
        # No broker right now: the workers' heartbeats schedule on their own every few seconds.
        log.warning("could not queue a scheduling pass", exc_info=True)


class RunError(ValueError):
    """A request about a run that cannot be carried out; the message says why."""


# ------------------------------------------------------------------------------- user actions


# run_create's default project: the dataset's (project_of_new_work), told apart from None (none).
DATASETS_PROJECT = object()


def run_create(
    *,
    owner,
    dataset: Dataset,
    name: str,
    network: str,
    config: dict,
    device_request: DeviceRequest | dict,
    priority: int = 0,
    sweep: str = "",
    executor: str = Run.Executor.LOCAL,
    nodes: int = 1,
    project=DATASETS_PROJECT,
    dataset_version: DatasetVersion | None = None,
) -> Run:
    """A new run in the queue; its config has been validated by the caller (run_submit, sweep_create).
    `project`: the project it goes into; by default its dataset's, when its owner is a member.
    `dataset_version`: by default the dataset's latest (none yet while it builds: its build's)."""
    if dataset.status in (Dataset.Status.FAILED, Dataset.Status.CANCELLED):
        raise RequestError("dataset", f"{dataset.name!r} is {dataset.status}; build it again or choose another")
    with transaction.atomic():
        run = Run.objects.create(
            owner=owner,
            project=project_of_new_work(owner=owner, dataset=dataset) if project is DATASETS_PROJECT else project,
            dataset=dataset,
            dataset_version=dataset_version or latest_version(dataset),
            name=name,
            network=network,
            config=config,
            device_request=DeviceRequest.of(device_request).to_dict(),
            priority=priority,
            sweep=sweep,
            executor=executor,
            nodes=nodes,
        )
        submitted = executor_named(executor).submitted_words
        RunTransition.objects.create(run=run, from_state="", to_state=Run.State.QUEUED, reason=submitted)
        # A folder under a brand-new id can only be left over from a deleted database.
        shutil.rmtree(run.run_dir, ignore_errors=True)
        run_events_append(
            run_id=run.pk,
            events=[{"type": protocol.STATUS, "state": Run.State.QUEUED, "message": submitted, "source": "workbench"}],
        )
        transaction.on_commit(queue_scheduling)
    run.refresh_from_db()
    after = {"network": network, "dataset": dataset.pk, "project": run.project_id, "executor": executor}
    audit.record(action="run.create", actor=owner, target=run, after=after)
    return run


def run_submit(
    *,
    owner,
    dataset: Dataset,
    name: str,
    network: str,
    config: dict,
    gpus: str | int | None = "auto",
    priority: int = 0,
    executor: str | None = None,
    nodes: int | str | None = 1,
    project=DATASETS_PROJECT,
    dataset_version: int | None = None,
) -> Run:
    """Validates a run request (executor, devices per node, trainer config, the project it names:
    a slug, or None for none; by default its dataset's; the dataset's version, by default its
    latest) and queues it; RequestError names the field."""
    if project is not DATASETS_PROJECT:
        project = project_to_put_into(owner, project)
    version = version_to_train_on(dataset, dataset_version) if dataset_version is not None else None
    request, executor, nodes = resolve_placement(gpus=gpus, executor=executor, nodes=nodes)
    # Before the config's weights are resolved (copied out of a run): nothing is written for a refusal.
    memory_known = executor_named(executor).knows_device_memory
    check_network_fits(network=network, config=config, dataset=dataset, request=request, memory_known=memory_known)
    config = validate_trainer_config(
        config, network=network, request=request, owner=owner, nodes=nodes, dataset=dataset
    )
    return run_create(
        executor=executor,
        nodes=nodes,
        owner=owner,
        dataset=dataset,
        name=name or f"{network} on {dataset.name}",
        network=network,
        config=config,
        device_request=request,
        priority=priority,
        project=project,
        dataset_version=version,
    )


def run_retrain(*, run: Run, by, version: DatasetVersion) -> Run:
    """`run` again, as it was submitted, on another version of its dataset (its config, network,
    devices and executor), submitted by `by` and checked as any submission is."""
    if version.dataset_id != run.dataset_id:
        raise RequestError("dataset_version", f"version {version.number} is not of dataset {run.dataset.name!r}")
    return run_submit(
        owner=by,
        dataset=run.dataset,
        name=f"{run.name} (v{version.number})"[:200],
        network=run.network,
        config=copy.deepcopy(run.config),
        gpus=DeviceRequest.of(run.device_request).spec,
        priority=run.priority if by.is_staff else 0,
        executor=run.executor,
        nodes=run.nodes,
        dataset_version=version.number,
    )


def resolve_placement(*, gpus, executor, nodes) -> tuple[DeviceRequest, str, int]:
    """The device request per node, the executor and the node count, checked; "auto" is one GPU
    on Slurm (the cluster has them, or sbatch says it has none) and locally one GPU when a worker
    has GPUs, else the CPU."""
    request = parse_device_request(gpus)
    executor, nodes = check_executor(executor, nodes, request)
    return resolve_devices(request, executor=executor), executor, nodes


def resolve_devices(request: DeviceRequest, *, executor: str) -> DeviceRequest:
    """ "auto" made concrete for the executor: the new-run form's preview and the submission
    resolve it by this one rule."""
    return request.resolved(gpus_online=executor_named(executor).has_gpus_for_auto or gpus_online())


def sweep_create(*, owner, dataset: Dataset, base_request: dict, grid: dict) -> list[Run]:
    """One run per combination of `grid` ({"lr": [...], "batch_size": [...]}) over the run fields
    of `base_request` (name, network, config, gpus, priority), sharing one sweep name. Every
    combination is validated before any run exists, then all are created in one transaction: all
    or nothing, and the scheduler hears of them only once they are all there."""
    network = base_request.get("network", "")
    request, executor, nodes = resolve_placement(
        gpus=base_request.get("gpus", "auto"), executor=base_request.get("executor"), nodes=base_request.get("nodes")
    )
    sweep_fits(
        network=network, config=base_request.get("config") or {}, grid=grid, dataset=dataset, request=request,
        memory_known=executor_named(executor).knows_device_memory,
    )  # fmt: skip
    checked = sweep_validate(
        config=base_request.get("config") or {},
        grid=grid,
        network=network,
        request=request,
        owner=owner,
        nodes=nodes,
        dataset=dataset,
    )
    base = base_request.get("name") or f"{network} on {dataset.name}"
    sweep = f"{base[:50]} · {uuid.uuid4().hex[:6]}"
    varied = [key for key in SWEEP_FIELDS if len({repr(combination.get(key)) for combination, _ in checked}) > 1]
    with transaction.atomic():
        return [
            run_create(
                owner=owner,
                dataset=dataset,
                name=" ".join([base, *(_SWEEP_LABELS[key](combination[key]) for key in varied)])[:200],
                network=network,
                config=config,
                device_request=request,
                priority=base_request.get("priority") or 0,
                sweep=sweep,
                executor=executor,
                nodes=nodes,
            )
            for combination, config in checked
        ]


# How a run of a sweep shows the values it was given, in its name.
_SWEEP_LABELS = {
    "lr": lambda lr: f"lr={lr:g}",
    "batch_size": lambda batch: f"bs={batch}",
    "preset": lambda preset: f"preset={preset}",
}


def _request_stop(*, run: Run, kind: str, to_state: str, verb: str) -> Run:
    # The state may change under us (the scheduler starting the run): look again and retry.
    for _ in range(5):
        run.refresh_from_db()
        if executor_for(run).holds(run):
            # Its executor follows a trainer or job of it: asked, it stops it with grace (SIGTERM,
            # a checkpoint, then SIGKILL or a cancel) and ends the run by the outcome table.
            done = bool(Run.objects.filter(pk=run.pk, state=run.state).update(stop_request=kind))
        elif run.state in Run.PENDING_STATES or (run.state == Run.State.PAUSED and kind == Run.StopRequest.ABORT):
            done = run_finish(run=run, to_state=to_state, reason=f"{verb} by the user", from_states=[run.state])
        else:
            raise RunError(f"run {run.pk} is {run.state} and cannot be {verb}")
        if done:
            run.refresh_from_db()
            return run
    raise RunError(f"run {run.pk} keeps changing state; try again")


def run_abort(*, run: Run, by=None) -> Run:
    before = _state_of(run)
    run = _request_stop(run=run, kind=Run.StopRequest.ABORT, to_state=Run.State.ABORTED, verb="aborted")
    audit.record(action="run.abort", actor=by, target=run, before=before, after=_state_of(run))
    return run


def run_pause(*, run: Run, by=None) -> Run:
    if run.state == Run.State.PAUSED:
        raise RunError(f"run {run.pk} is already paused")
    before = _state_of(run)
    run = _request_stop(run=run, kind=Run.StopRequest.PAUSE, to_state=Run.State.PAUSED, verb="paused")
    audit.record(action="run.pause", actor=by, target=run, before=before, after=_state_of(run))
    return run


def _state_of(run: Run) -> dict:
    """What the audit trail keeps of a run's state before and after a user's action."""
    return {"state": run.state, "stop_request": run.stop_request}


def run_prune(*, run: Run, reason: str) -> bool:
    """Its search gives up on the run: a running trainer is asked to stop with a checkpoint (as for
    a pause) and the run ends `pruned` with `reason` (the outcome table); one not started ends at
    once. A stop already asked for (the user's abort or pause) is left as it is: False."""
    for _ in range(5):
        run.refresh_from_db()
        if executor_for(run).holds(run):
            asked = Run.objects.filter(pk=run.pk, state=run.state, stop_request="")
            if asked.update(stop_request=Run.StopRequest.PRUNE, stop_reason=reason[:300]):
                return True
            if Run.objects.filter(pk=run.pk).exclude(stop_request="").exists():
                return False
        elif run.state in Run.PENDING_STATES or run.state == Run.State.PAUSED:
            if run_finish(run=run, to_state=Run.State.PRUNED, reason=reason, from_states=[run.state]):
                return True
        else:
            return False  # it ended meanwhile: nothing to stop
    return False


def run_resume(*, run: Run, by=None) -> Run:
    """A paused run goes back to the queue and continues from its checkpoint on any suitable devices."""
    before = _state_of(run)
    changed = run_transition(
        run=run,
        to_state=Run.State.QUEUED,
        from_states=[Run.State.PAUSED],
        reason="resumed by the user",
        queued_at=timezone.now(),
    )
    if not changed:
        raise RunError(f"run {run.pk} is {run.state}, not paused")
    transaction.on_commit(queue_scheduling)
    audit.record(action="run.resume", actor=by, target=run, before=before, after={"state": Run.State.QUEUED})
    return run


def run_delete(*, run: Run, by=None) -> None:
    """Deletes the run, its events and its files (checkpoints, exports). Rows of other apps that
    belong to the run go with it by cascade, and those apps remove their own files (inference:
    receivers.remove_job_files)."""
    if run.state == Run.State.RUNNING:
        raise RunError(f"run {run.pk} is running; abort it first")
    folder = run.run_dir
    before = {"name": run.name, "state": run.state, "owner": run.owner.username, "dataset": run.dataset_id}
    with transaction.atomic():
        audit.record(action="run.delete", actor=by, target=run, before=before)
        run.delete()
        # The files go only once the rows are gone for good.
        transaction.on_commit(lambda: shutil.rmtree(folder, ignore_errors=True))
