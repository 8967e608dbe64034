"""The training engine: build everything, `train_one_epoch`, `evaluate`, and `run_rank` that
orchestrates one process. `trainer.run.train()` is the entry point (one or N processes).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from trainer import protocol
from trainer.augment import TrainAugment
from trainer.checkpoint import CheckpointStore, rng_state, set_rng_state
from trainer.config import ConfigError, TrainConfig
from trainer.data import Data, DevicePrefetcher, build_data, input_shape
from trainer.dataset_folder import DatasetFolderError, DatasetInfo, load_dataset_folder
from trainer.early_stop import EarlyStopping, early_stop_outcome, early_stopping_for, improves
from trainer.ema import checkpoint_models, first_weights, resumed_models, weights_average
from trainer.events import Events, error_summary, hide_folders
from trainer.finetune import recipe as finetune
from trainer.heldout import save_heldout
from trainer.memory import OutOfMemory, is_oom, oom_message
from trainer.meter import Meter
from trainer.networks import InputSpec, load_pretrained
from trainer.parallel import SplitError, Stage, split_model
from trainer.preflight import facts_of, preflight
from trainer.protocol import EXIT_CONFIG, EXIT_FAILED, EXIT_NONFINITE, EXIT_OOM, Outcome
from trainer.solver import build_optimizer, build_scheduler
from trainer.solver import total_steps as solver_total_steps
from trainer.stopping import StopFlag
from trainer.tasks import Task, task_for
from trainer.tasks.base import best_metric_for
from trainer.threads import set_thread_share

log = logging.getLogger("trainer")


class NonFiniteLoss(RuntimeError):
    pass


@dataclass
class Run:
    """Everything one process trains with."""

    cfg: TrainConfig
    info: DatasetInfo
    data: Data
    model: nn.Module  # what the loop calls (maybe DDP, maybe compiled)
    model_without_ddp: nn.Module  # what is saved and exported
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler
    device: torch.device  # where batches, loss and metrics live: the first stage's device
    rank: int
    world: int
    events: Events
    stop: StopFlag
    store: CheckpointStore
    total_steps: int
    step: int = 0
    best: float | None = None
    meter: Meter = field(default_factory=Meter)
    started: float = field(default_factory=time.perf_counter)
    start_step: int = 0
    stage_devices: list[torch.device] = field(default_factory=list)  # more than one: model parallel
    early: EarlyStopping | None = None
    task: Task | None = None  # what differs by the dataset's task (trainer/tasks/)
    best_metric: str = "top1"  # the metric the best checkpoint and early stopping watch, for this task
    ema: Any = None  # the weights' moving average (trainer/ema.py): validated, saved and exported
    weights: str = protocol.RAW  # what the checkpoints hold as `model`, by the last validation

    @property
    def epoch(self) -> float:
        return self.step / self.data.steps_per_epoch

    def autocast(self) -> contextlib.AbstractContextManager:
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.cfg.precision)
        return torch.autocast(self.device.type, dtype=dtype, enabled=dtype is not None)


def prepare(cfg: TrainConfig) -> tuple[DatasetInfo, InputSpec]:
    """Everything that can be checked before any process starts: the dataset folder, then the
    pre-flight (trainer/preflight.py: the rules the workbench asked at submit, in the same words)."""
    try:
        info = load_dataset_folder(cfg.data.dataset)
    except DatasetFolderError as exc:
        raise ConfigError(f"data.dataset: {exc}") from None
    errors = preflight(cfg, facts_of(info))
    if errors:
        raise errors[0]
    channels, height, width = input_shape(cfg, info)
    return info, InputSpec(channels, height, width, info.num_classes, cfg.custom_layers or [])


def place_model(model: nn.Module, cfg: TrainConfig, spec: InputSpec, devices: list[torch.device]) -> list[Stage]:
    """Moves `model` to its device, or splits it over `devices` (model parallel, balanced for the
    configured micro-batch); returns the stages (none when it is whole)."""
    memory_format = torch.channels_last if cfg.channels_last else torch.preserve_format
    if len(devices) == 1:
        model.to(devices[0], memory_format=memory_format)
        return []
    sample = torch.zeros(1, spec.channels, spec.height, spec.width)
    try:
        return split_model(model, devices, sample, batch=cfg.micro_batch, memory_format=memory_format)
    except SplitError as exc:
        raise ConfigError(f"model_parallel: {exc}") from None


def build_run(
    cfg: TrainConfig, *, rank: int, world: int, devices: list[torch.device], events: Events, stop: StopFlag
) -> Run:
    """This process's run; `devices` are its stages' devices (one, unless the model is split)."""
    device = devices[0]
    info, spec = prepare(cfg)
    task = task_for(info.task)
    data = build_data(cfg, info, task=task, rank=rank, world=world, pin_memory=device.type == "cuda")
    torch.manual_seed(cfg.seed)  # identical initial weights on every rank
    model = task.build_model(cfg.network, spec)
    loaded, replaced = load_pretrained(model, cfg.pretrained) if cfg.pretrained else ([], [])
    if rank == 0 and cfg.pretrained:
        finetune.describe_load(loaded, replaced, info.num_classes)
    batchnorm_layers = finetune.keep_batchnorm_eval(model) if cfg.freeze_bn else 0
    stages = place_model(model, cfg, spec, devices)
    if rank == 0 and len(stages) > 1:
        for number, stage in enumerate(stages, 1):
            log.info("model parallel: stage %d of %d on %s", number, len(stages), stage.describe())
    torch.manual_seed(cfg.seed + rank)  # but independent dropout streams
    total_steps = solver_total_steps(cfg.epochs, data.train_count, cfg.batch_size)
    groups = finetune.parameter_groups(model, loaded, cfg)
    if rank == 0:
        finetune.report_plan(groups, cfg, batchnorm_layers)
    optimizer = build_optimizer(cfg.solver, groups)
    frozen = finetune.frozen_steps(groups, cfg, data.steps_per_epoch)
    scheduler = build_scheduler(cfg.solver, optimizer, total_steps, frozen=frozen)
    scaler = torch.amp.GradScaler(device.type, enabled=cfg.precision == "fp16")
    wrapped: nn.Module = model
    if cfg.compile:
        wrapped = torch.compile(wrapped)
    if world > 1:
        # A model on several devices takes no device_ids: DDP then reduces each stage's gradients
        # where they are.
        single_gpu = device.type == "cuda" and len(devices) == 1
        wrapped = DistributedDataParallel(wrapped, device_ids=[device.index] if single_gpu else None)
    data.normalize = data.normalize.to(device)
    if task.traits.augments:
        data.augment = TrainAugment(cfg, num_classes=info.num_classes, out_size=data.input_shape[1:], rank=rank)
    return Run(
        cfg,
        info,
        data,
        wrapped,
        model,
        optimizer,
        scheduler,
        scaler,
        device,
        rank,
        world,
        events,
        stop,
        CheckpointStore(cfg.run_dir, cfg.keep_last),
        total_steps,
        stage_devices=devices,
        task=task,
        best_metric=best_metric_for(task, cfg.best_metric),
        ema=weights_average(cfg, model),
        weights=first_weights(cfg),
    )


# ----------------------------------------------------------------------------------- checkpoints


def preprocessing_of(run: Run) -> dict[str, Any]:
    """What inference must do to an image to match training (stored in checkpoints and bundles)."""
    info, cfg = run.info, run.cfg
    return {
        "width": info.image_width,
        "height": info.image_height,
        "channels": info.channels,
        "resize_mode": info.resize_mode,
        "crop": cfg.data.crop_size,
        "mean": cfg.data.mean_subtraction if run.data.normalize.std is None else "weights",
        "scale": 1 / 255,
        # Pretrained weights' own std (after the mean and the 1/255): inference divides by it too.
        "std": None if run.data.normalize.std is None else run.data.normalize.std.flatten().tolist(),
        "input_shape": list(run.data.input_shape),
    }


def save_checkpoint(run: Run, *, is_best: bool = False, metrics: dict[str, Any] | None = None) -> None:
    """Called on every rank (RNG states are gathered); only rank 0 writes."""
    rngs: list[Any] = [rng_state()]
    if run.world > 1:
        rngs = [None] * run.world
        dist.all_gather_object(rngs, rng_state())
    if run.rank != 0:
        return
    state = {
        # With a weights' average, "model" is the better of the two at the last validation (what
        # inference and exports load), and the other is kept for a resume.
        **checkpoint_models(run.model_without_ddp, run.ema, run.weights),
        "optimizer": run.optimizer.state_dict(),
        "scheduler": run.scheduler.state_dict(),
        "scaler": run.scaler.state_dict(),
        "step": run.step,
        "epoch": run.epoch,
        "best": run.best,
        "early_stopping": run.early.state() if run.early is not None else None,
        "meter": run.meter.state(),
        "rng": rngs,
        "config": run.cfg.to_dict(),
        "labels": run.info.labels,
        "task": run.info.task,
        "input_shape": list(run.data.input_shape),
        "preprocessing": preprocessing_of(run),
        "mean": None if run.data.normalize.mean is None else run.data.normalize.mean.cpu(),
    }
    path = run.store.save(state, step=run.step, is_best=is_best, metrics=metrics)
    # The file's name only: these lines reach the run page, and the folders are the server's business.
    log.info("checkpoint saved: %s", Path(path).name)


def resume_from_latest(run: Run) -> bool:
    path = run.store.latest()
    if path is None:
        return False
    state = run.store.load(path)
    raw, averaged = resumed_models(state)
    run.model_without_ddp.load_state_dict(raw)
    if run.ema is not None:
        run.ema.module.load_state_dict(averaged)
        run.weights = state.get("weights", protocol.AVERAGE)
    run.optimizer.load_state_dict(state["optimizer"])
    run.scheduler.load_state_dict(state["scheduler"])
    run.scaler.load_state_dict(state["scaler"])
    run.step = run.start_step = int(state["step"])
    run.best = state.get("best")
    if run.early is not None:
        run.early.load(state.get("early_stopping"))
    rngs = state["rng"]
    set_rng_state(rngs[run.rank] if len(rngs) == run.world else rngs[0])
    meter = state.get("meter") or {}
    if meter.get("loss_count"):
        run.meter.loss_sum, run.meter.loss_count = meter["loss_sum"], meter["loss_count"]
    placement = ("devices", "model_parallel", "run_dir")  # where it runs, not what it learns
    changed = [k for k, v in state["config"].items() if run.cfg.to_dict().get(k) != v and k not in placement]
    if changed:
        log.warning("resuming with changed config fields: %s", ", ".join(changed))
    log.info("resumed from %s at step %d (epoch %.3f)", Path(path).name, run.step, run.epoch)
    return True


# ----------------------------------------------------------------------------------- the loop


def _should_stop(run: Run) -> bool:
    if run.world == 1:
        return run.stop.requested
    if run.step % run.cfg.stop_check_interval:
        return False
    # Every rank reaches this all_reduce at the same step, so they all stop at the same step.
    flag = torch.tensor([1.0 if run.stop.requested else 0.0], device=run.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def report_metrics(run: Run) -> None:
    loss = run.meter.loss()
    if not math.isfinite(loss):
        raise NonFiniteLoss(
            f"training loss became {loss} by step {run.step} (epoch {run.epoch:.2f}, "
            f"lr {run.optimizer.param_groups[0]['lr']:.4g}); lower solver.base_lr, add warmup "
            f"(solver.warmup_percent) or gradient clipping (solver.grad_clip_norm)"
        )
    elapsed = max(1e-9, time.perf_counter() - run.meter.start)
    per_process = run.meter.images / elapsed
    fields: dict[str, Any] = {
        "step": run.step,
        "epoch": round(run.epoch, 5),
        "images_seen": run.step * run.cfg.batch_size,
        "loss": loss,
        "lr": run.optimizer.param_groups[0]["lr"],
        "images_per_sec": per_process * run.world,
        "images_per_sec_per_process": per_process,
        "data_wait_share": min(1.0, run.meter.data_wait / elapsed),
        **run.meter.part_losses(),
    }
    if run.device.type == "cuda":
        # With the model split, the fullest of this process's GPUs (the one that would run out).
        fields["gpu_memory_bytes"] = max(torch.cuda.max_memory_allocated(d) for d in run.stage_devices)
        fields["gpu_memory_reserved_bytes"] = max(torch.cuda.memory_reserved(d) for d in run.stage_devices)
    run.events.metrics(**fields)
    done = run.step - run.start_step
    wall = time.perf_counter() - run.started
    eta = wall / done * (run.total_steps - run.step) if done else None
    run.events.progress(100.0 * run.step / run.total_steps, eta, wall, step=run.step)
    run.meter.reset()


def train_one_epoch(run: Run, epoch: int) -> bool:
    """Train from the current step to the end of `epoch` (or of the run). True if stopped early."""
    cfg, accum = run.cfg, run.cfg.grad_accum
    start_batch = run.step - epoch * run.data.steps_per_epoch
    run.data.train_sampler.set_epoch(epoch, start_batch)
    val_every = round(cfg.val_interval * run.data.steps_per_epoch) or run.total_steps
    snap_every = round(cfg.snapshot_interval * run.data.steps_per_epoch) or run.total_steps
    end_step = min(run.total_steps, (epoch + 1) * run.data.steps_per_epoch)
    run.model.train()
    micro, wait_start = 0, time.perf_counter()
    for images, targets in DevicePrefetcher(run.data.train_loader, run.device):
        wait = time.perf_counter() - wait_start
        y = run.task.to_device(targets, run.device)
        x, y = run.data.augment(
            images.to(run.device, non_blocking=True), y, step=run.step * accum + micro, normalize=run.data.normalize
        )
        micro += 1
        last_micro = micro % accum == 0
        # DDP: skip the gradient all-reduce on all but the last micro-batch of a step.
        sync = run.model.no_sync() if run.world > 1 and not last_micro else contextlib.nullcontext()
        with sync:
            with run.autocast():
                loss, parts = run.task.loss(run.model, x, y)
            run.scaler.scale(loss / accum).backward()
        run.meter.update(loss, x.shape[0], wait, parts)
        if last_micro:
            if cfg.solver.grad_clip_norm:
                run.scaler.unscale_(run.optimizer)
                nn.utils.clip_grad_norm_(run.model.parameters(), cfg.solver.grad_clip_norm)
            run.scaler.step(run.optimizer)
            run.scaler.update()
            run.optimizer.zero_grad(set_to_none=True)
            run.scheduler.step()
            if run.ema is not None:
                run.ema.update(run.model_without_ddp, step=run.step)
            run.step += 1
            # Every metrics_interval steps, and at the epoch's (or run's) last step, so a run
            # shorter than one interval still draws its loss, learning-rate and speed curves.
            if run.step % cfg.metrics_interval == 0 or run.step >= end_step:
                if run.world > 1:
                    run.meter.average_over_ranks()
                if run.rank == 0:
                    report_metrics(run)
                else:
                    run.meter.reset()
            if run.step % val_every == 0 and run.step < run.total_steps:
                validate_and_maybe_save(run, snapshot=run.step % snap_every == 0)
                run.model_without_ddp.train()
                if run.early is not None and run.early.triggered:
                    return True
            elif run.step % snap_every == 0 and run.step < run.total_steps:
                save_checkpoint(run)
            if _should_stop(run):
                return True
            if run.step >= end_step:
                break
        wait_start = time.perf_counter()
    return False


@torch.no_grad()
def evaluate(run: Run, model: nn.Module | None = None) -> dict[str, float]:
    """The task's validation metrics over the whole split (shards reduced over ranks), of `model`
    (the weights' average) or the run's.

    Uses the model without DDP: shards may differ by one batch between ranks, and DDP's forward
    would then wait for a buffer broadcast that the other rank never joins.
    """
    model = run.model_without_ddp if model is None else model
    model.eval()
    evaluator = run.task.evaluator(run.info, run.device)
    for images, targets in DevicePrefetcher(run.data.val_loader, run.device):
        x = run.data.normalize(images.to(run.device, non_blocking=True))
        with run.autocast():
            evaluator.update(model, x, run.task.to_device(targets, run.device))
    result = evaluator.compute(world=run.world)
    if run.rank == 0:
        for note in evaluator.notes:
            log.warning("%s", note)
    return result


def validate_and_maybe_save(run: Run, *, snapshot: bool) -> dict[str, float] | None:
    if run.data.val_loader is None:
        if snapshot:
            save_checkpoint(run)
        return None
    result = evaluate(run)
    if run.ema is not None:
        # Both are reported, the average's as ema_<metric> (the live page's two curves), and the
        # better of the two (or the config's choice) is what this validation's checkpoint holds.
        averaged = evaluate(run, model=run.ema.module)
        result = {**result, **{protocol.checkpoint_series(name, averaged=True): v for name, v in averaged.items()}}
    held = protocol.checkpoint_weights(
        run.best_metric, result, averaged=run.ema is not None, forced=run.cfg.best_weights
    )
    run.weights = held
    value = result[protocol.checkpoint_series(run.best_metric, averaged=held == protocol.AVERAGE)]
    better = improves(run.best_metric, value, run.best)
    if better:
        run.best = value
    if run.rank == 0:  # with an average, the event says whose weights its checkpoint holds
        held_by = {"weights": held} if run.ema is not None else {}
        run.events.validation(step=run.step, epoch=round(run.epoch, 5), **result, **held_by)
    if run.early is not None:  # every rank sees the same (reduced) result: they stop together
        run.early.update(value, epoch=run.epoch, weights=held)
    if snapshot or better:
        save_checkpoint(run, is_best=better, metrics={**result, "epoch": round(run.epoch, 5), "weights": held})
    return result


def fit(run: Run) -> Outcome:
    steps_per_epoch = run.data.steps_per_epoch
    while run.step < run.total_steps:
        epoch, before = run.step // steps_per_epoch, run.step
        stopped = train_one_epoch(run, epoch)
        if run.step == before and not stopped:  # a loader that yields nothing would loop forever
            raise RuntimeError(f"epoch {epoch} produced no training batches (step {run.step})")
        if stopped and run.early is not None and run.early.triggered:
            return early_stop_outcome(run.early, run.cfg, step=run.step, epoch=run.epoch, averaged=run.ema is not None)
        if stopped:
            save_checkpoint(run)
            why = run.stop.signal_name or "request"
            return Outcome.stopped(
                f"stopped by {why} at step {run.step} (epoch {run.epoch:.2f}); checkpoint saved",
                step=run.step,
                checkpoint_saved=True,
            )
    result = validate_and_maybe_save(run, snapshot=True)
    if run.cfg.heldout_predictions:  # a label check's fold (trainer/heldout.py)
        save_heldout(run)
    if run.rank == 0:
        run.events.progress(100.0, 0.0, time.perf_counter() - run.started, step=run.step)
    message = f"finished {run.step} steps ({run.epoch:.2f} epochs)"
    if result:
        shown = "top1" if "top1" in result else run.best_metric
        message += f", val top-1 {result['top1']:.4f}" if shown == "top1" else f", val {shown} {result[shown]:.4f}"
    return Outcome.done(message, step=run.step, **(result or {}))


def torch_device(name: str | int) -> torch.device:
    return torch.device("cpu") if name == "cpu" else torch.device("cuda", int(name))


def run_rank(cfg: TrainConfig, *, rank: int, world: int, resume: bool, events: Events, stop: StopFlag) -> Outcome:
    """Train in this process (rank `rank` of `world`); never raises, returns the outcome."""
    set_thread_share(cfg, rank=rank)  # trainer/threads.py: its share of the node's cores
    pretrained = cfg.pretrained and os.path.dirname(cfg.pretrained)
    hide_folders(cfg.run_dir, cfg.data.dataset, pretrained)  # never named in what its owner reads
    devices = [torch_device(name) for name in cfg.rank_devices(rank)]
    device = devices[0]
    if device.type == "cuda":
        torch.cuda.set_device(device)
        # Fixed input sizes: let cuDNN pick the fastest kernels once. fp32 runs use TF32 tensor
        # cores for matmuls and convolutions (what DIGITS users expect "fp32" to cost).
        torch.backends.cudnn.benchmark = True
        torch.set_float32_matmul_precision("high")
    run: Run | None = None
    try:
        run = build_run(cfg, rank=rank, world=world, devices=devices, events=events, stop=stop)
        run.early = early_stopping_for(cfg, metric=run.best_metric)
        if resume and not resume_from_latest(run):
            log.info("no checkpoint yet; starting from scratch")
        if rank == 0:
            events.status(
                "running",
                f"training {cfg.network} on {run.data.train_count} images, "
                f"{run.total_steps} steps on {world} process(es)",
                step=run.step,
                total_steps=run.total_steps,
                resumed_from_step=run.start_step if resume else None,
                steps_per_epoch=run.data.steps_per_epoch,
            )
        return fit(run)
    except ConfigError as exc:
        return Outcome.failed(EXIT_CONFIG, str(exc))
    except NonFiniteLoss as exc:
        return Outcome.failed(EXIT_NONFINITE, str(exc), step=run.step if run else 0)
    except (OutOfMemory, torch.cuda.OutOfMemoryError, RuntimeError) as exc:
        if not isinstance(exc, OutOfMemory) and not is_oom(exc):
            log.exception("training failed")
            return Outcome.failed(EXIT_FAILED, error_summary(exc))
        return Outcome.failed(EXIT_OOM, oom_message(cfg, devices, exc), step=run.step if run else 0)
    except Exception as exc:  # the final status must carry the reason, not only a traceback
        log.exception("training failed")
        return Outcome.failed(EXIT_FAILED, error_summary(exc))
    finally:
        if run is not None:
            run.data.close()
