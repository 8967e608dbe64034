"""What crosses the process boundary between the trainer and whoever starts it: exit codes, event
types and their fields, the run states a trainer reports, and the checkpoint file layout.

Standard library only (no torch, no Django): the web app, its workers and the inference and export
child processes import this module to read what a trainer (or the inference engine, which speaks
the same protocol) wrote, without paying for torch. The schema is documented in docs/formats.md.

A child process speaks it as: JSON lines of typed events (`trainer.events.JsonLinesReporter`)
whose last one is a `status` with a final state and `exit_code`, then it exits with that code.
`read_events` is the one parser of such lines.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# ----------------------------------------------------------------------------------- exit codes

EXIT_DONE = 0  # finished all epochs (inference: the job's result is written)
EXIT_FAILED = 1  # any other error (message in the final status event)
EXIT_CONFIG = 2  # invalid config, dataset or input; nothing was done
EXIT_STOPPED = 3  # SIGTERM/SIGINT: stopped at an agreed step, checkpoint saved, resumable
EXIT_OOM = 4  # out of memory (message names batch sizes and device memory)
EXIT_NONFINITE = 5  # loss became NaN/inf

# Ends that are not failures: every rank of a run exits with one of these or the run failed.
EXIT_OK = (EXIT_DONE, EXIT_STOPPED)

# What each failing code means, for a reason when the final status has no message. The same
# config on the same data fails the same way again, so a starter does not retry these.
FAILURE_REASONS = {
    EXIT_FAILED: "failed",
    EXIT_CONFIG: "bad configuration or dataset",
    EXIT_OOM: "out of memory",
    EXIT_NONFINITE: "loss became NaN/inf",
}

# ----------------------------------------------------------------------------------- states

STARTING, RUNNING, DONE, FAILED, STOPPED = "starting", "running", "done", "failed", "stopped"
STATES = (STARTING, RUNNING, DONE, FAILED, STOPPED)
FINAL_STATES = (DONE, STOPPED, FAILED)


@dataclass
class Outcome:
    """How one process ended: its exit code and the final status event's state, message, fields."""

    code: int
    state: str  # one of FINAL_STATES
    message: str
    fields: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def done(cls, message: str, **fields: Any) -> Outcome:
        return cls(EXIT_DONE, DONE, message, fields)

    @classmethod
    def stopped(cls, message: str, **fields: Any) -> Outcome:
        return cls(EXIT_STOPPED, STOPPED, message, fields)

    @classmethod
    def failed(cls, code: int, message: str, **fields: Any) -> Outcome:
        return cls(code, FAILED, message, fields)

    def status_fields(self) -> dict[str, Any]:
        """The final `status` event's fields (besides `type` and `time`)."""
        return {"state": self.state, "message": self.message, "exit_code": self.code, **self.fields}


# ----------------------------------------------------------------------------------- events

METRICS, VALIDATION, STATUS, LOG, PROGRESS, SYSTEM = "metrics", "validation", "status", "log", "progress", "system"
EVENT_TYPES = (METRICS, VALIDATION, STATUS, LOG, PROGRESS, SYSTEM)
# Events reported per optimizer step: a resumed trainer repeats the steps since its checkpoint.
STEP_EVENTS = (METRICS, VALIDATION)

# A benchmark (`python -m trainer benchmark`) speaks the same protocol, with two more types: one
# `cell` per measured cell of its table and one `largest_batch` per GPU count it searched.
CELL, LARGEST_BATCH = "cell", "largest_batch"
BENCHMARK_EVENT_TYPES = (CELL, LARGEST_BATCH, STATUS, LOG, PROGRESS)
CELL_STATUSES = ("ok", "oom", "error")

# The fields every event of a type carries besides `type` and `time` (docs/formats.md lists the
# optional ones). `system` events are written by a sampler beside the trainer, not by the trainer.
EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    METRICS: ("step", "epoch", "images_seen", "loss", "lr", "images_per_sec", "data_wait_share"),
    VALIDATION: ("step", "epoch", "val_loss", "top1"),
    STATUS: ("state", "message"),
    LOG: ("line", "level"),
    PROGRESS: ("percent", "eta_seconds", "elapsed"),
    SYSTEM: (),
}


def read_events(lines: Iterable[bytes | str]) -> Iterator[dict[str, Any]]:
    """The events in complete JSON lines; a line that is not JSON (a library printing to the same
    stream) becomes a warning `log` event instead of being lost or stopping the reader."""
    for line in lines:
        text = line.decode(errors="replace") if isinstance(line, bytes) else line
        if not text.strip():
            continue
        try:
            event = json.loads(text)
        except json.JSONDecodeError:
            event = None
        if not isinstance(event, dict):
            event = {"type": LOG, "line": text.rstrip("\n"), "level": "warning"}
        yield event


def final_status(events: Iterable[dict[str, Any]], previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """The last `status` event among `events`, else `previous` (or {})."""
    return next((e for e in reversed(list(events)) if e.get("type") == STATUS), previous or {})


# ----------------------------------------------------------------------------------- tasks

# What a dataset (and every run, inference, test and export on it) does: dataset.json's "task".
CLASSIFICATION = "classification"
DETECTION = "detection"
SEGMENTATION = "segmentation"
TASKS = (CLASSIFICATION, DETECTION, SEGMENTATION)
# Each task's validation metrics as its `validation` events name them; the first is the best
# checkpoint's by default, with its direction ("max": higher is better). val_loss is every task's.
TASK_METRICS = {
    CLASSIFICATION: ("top1", "top5", "val_loss"),
    # Detection networks give losses only in train mode (which would move BatchNorm's statistics):
    # their validation is mAP alone.
    DETECTION: ("map", "map_50", "map_75", "mar_100"),
    SEGMENTATION: ("miou", "pixel_accuracy", "dice", "val_loss"),
}


def best_metric_of(task: str, requested: str) -> str:
    """The metric the best checkpoint and early stopping watch on a dataset of `task`: the
    requested one when it is the task's; the classification default (top1) on another task's
    dataset means that task's first. ValueError naming the task's metrics otherwise."""
    metrics = TASK_METRICS[task]
    if requested in metrics:
        return requested
    if requested == "top1" and task != CLASSIFICATION:
        return metrics[0]
    raise ValueError(f"{requested!r} is not a metric of {task} ({', '.join(metrics)})")


METRIC_DIRECTION = {
    "top1": "max",
    "top5": "max",
    "map": "max",
    "map_50": "max",
    "map_75": "max",
    "mar_100": "max",
    "miou": "max",
    "pixel_accuracy": "max",
    "dice": "max",
    "val_loss": "min",
}
# With a weights' average on (solver.ema_decay, trainer/ema.py) the checkpoints hold the average:
# a validation event reports its metrics as ema_<metric> beside the raw weights', and the
# average's picks best.pt. `checkpoint_series` is the one rule of which name that is; the run
# page, its API and the runs list read "best" by it (workbench/runs/selectors.py).
EMA_PREFIX = "ema_"


def checkpoint_series(metric: str, *, averaged: bool) -> str:
    """The validation event's key whose value picks best.pt for `metric`: the average's
    (`ema_top1`) when the run averages its weights, `metric` itself otherwise."""
    return f"{EMA_PREFIX}{metric}" if averaged else metric


# Which weights a checkpoint holds as its `model` (what inference, exports and fine-tuning load)
# when the run keeps an average: the better of the two at each validation, by the best metric and
# its direction, unless the config's `best_weights` names one. An average can trail the trained
# weights far (a decay too slow for the run's length: top-1 39.7 % raw, 9.6 % averaged, issue 33),
# so the recipe's intent alone must not pick it. The trainer decides by this rule and records the
# pick in the validation event (`weights`) and the checkpoint (`weights`, also in index.json); the
# workbench reads "best" from that record (workbench/runs/selectors.py). An event written before
# issue 33 has none: its run's checkpoints held the average.
RAW, AVERAGE = "raw", "ema"
BEST_WEIGHTS = (RAW, AVERAGE)
WEIGHTS_WORDS = {RAW: "raw weights", AVERAGE: "EMA"}


def checkpoint_weights(metric: str, values: dict, *, averaged: bool, forced: str | None = None) -> str:
    """RAW or AVERAGE: the weights a validation's checkpoint holds, from its event's `values`. No
    average: the raw; `forced` when the config names one; else the better of `metric` and
    `ema_<metric>` in the metric's direction, the average on a tie (what the recipe asked for)."""
    if not averaged:
        return RAW
    if forced in BEST_WEIGHTS:
        return forced
    raw, average = values.get(metric), values.get(checkpoint_series(metric, averaged=True))
    if not _is_number(raw):
        return AVERAGE
    if not _is_number(average):
        return RAW
    higher = METRIC_DIRECTION[metric] == "max"
    return AVERAGE if (average >= raw if higher else average <= raw) else RAW


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# The index stored for "no class here" in a segmentation mask, and ignored by loss and metrics.
IGNORE_INDEX = 255
# The smallest image side the detection and segmentation networks take (their backbones' stride).
TASK_MIN_SIDE = 32


@dataclass(frozen=True)
class TaskTraits:
    """What the rules that run without torch (the pre-flight, the recipes, the dataset folder's
    reader, benchmark configs) need to know of a task. Each Task (trainer/tasks/) carries its row
    as `Task.traits`, so the engine asks the same values; the rules read the row, not the name."""

    # How a network is held to the images' size: None, the network itself says, built and run on
    # them (a classifier's head is sized by its input: trainer.preflight.input_refusal); otherwise
    # the smallest side its networks see anything at (torchvision's backbones' stride).
    min_side: int | None
    # The recipe's train-time augmentations (trainer/augment.py, trainer/recipes.py) apply: they
    # move pixels and mix labels into soft targets, carrying no boxes or masks along.
    augments: bool
    # Each split has a targets LMDB beside its images' (boxes, masks: trainer/targets.py); a
    # classifier's labels are in the image records themselves.
    targets_db: bool


TASK_TRAITS = {
    CLASSIFICATION: TaskTraits(min_side=None, augments=True, targets_db=False),
    DETECTION: TaskTraits(min_side=TASK_MIN_SIDE, augments=False, targets_db=True),
    SEGMENTATION: TaskTraits(min_side=TASK_MIN_SIDE, augments=False, targets_db=True),
}
# The networks of the detection and segmentation tasks (torchvision's builders, always without
# downloaded weights; trainer/tasks/ builds them). Classification's are trainer.config.NETWORKS.
TASK_NETWORKS = {
    DETECTION: (
        "fasterrcnn_mobilenet_v3_large_320_fpn",
        "fasterrcnn_mobilenet_v3_large_fpn",
        "fasterrcnn_resnet50_fpn_v2",
        "retinanet_resnet50_fpn_v2",
        "fcos_resnet50_fpn",
        "ssdlite320_mobilenet_v3_large",
    ),
    SEGMENTATION: (
        "lraspp_mobilenet_v3_large",
        "deeplabv3_mobilenet_v3_large",
        "deeplabv3_resnet50",
        "fcn_resnet50",
    ),
}


def task_of_network(network: str) -> str:
    """The task a network's name belongs to (classification for every other name)."""
    return next((task for task, names in TASK_NETWORKS.items() if network in names), CLASSIFICATION)


def layout_refusal(network: str, model_parallel: int) -> str | None:
    """Why `network` cannot be split over `model_parallel` devices, or None: torchvision's
    detectors and segmentation networks have no stages to place on several devices (their
    transforms, heads and losses move tensors among themselves), so they train whole on each."""
    task = task_of_network(network)
    if model_parallel > 1 and task != CLASSIFICATION:
        return (
            f"{network} is a {task} network: it trains whole on each GPU (data parallel over all of them), "
            "not split over several; give 1"
        )
    return None


# ----------------------------------------------------------------------------------- attempt files

# One attempt of a run leaves these in the run folder, whichever executor started it: the config
# the trainer was launched with, the events it wrote (the first node's; every other node writes
# its outcome beside it), how far the workbench has stored them, and on Slurm the batch script.


# The trainer's stdout and stderr, in the run (or benchmark) folder: the server's side of its log,
# tracebacks included, which no page, API or socket serves.
TRAINER_LOG = "trainer.log"
# A label check fold's held-out predictions in its run folder (trainer/heldout.py).
HELDOUT_FILE = "heldout.npy"


def launch_name(attempt: int) -> str:
    return f"launch-{attempt}.json"


def events_name(attempt: int | str) -> str:
    """`events-3.jsonl`; with attempt "$attempt", the name as a batch script writes it."""
    return f"events-{attempt}.jsonl"


def node_events_name(events: str, node_rank: int) -> str:
    """The outcome file of node `node_rank` (> 0) beside the first node's `events`."""
    target = Path(events)
    return str(target.with_name(f"{target.stem}.node{node_rank}{target.suffix}"))


def node_events_glob(attempt: int) -> str:
    return f"events-{attempt}.node*.jsonl"


def ledger_name(attempt: int) -> str:
    return f"events-{attempt}.ingested"


def batch_script_name(attempt: int) -> str:
    return f"slurm-{attempt}.sh"


def system_events_name(attempt: int | str) -> str:
    """The first node's `system` samples beside a Slurm trainer (trainer/system_samples.py); node
    k > 0 writes `node_events_name` of it. One writer per file: appends from two hosts may interleave."""
    return f"system-{attempt}.jsonl"


def node_system_events_glob(attempt: int) -> str:
    return f"system-{attempt}.node*.jsonl"


def ingested_name(events: str) -> str:
    """How far the workbench has stored an events file: `events-3.jsonl` -> `events-3.ingested`."""
    return f"{Path(events).stem}.ingested"


# ----------------------------------------------------------------------------------- checkpoints

CHECKPOINT_DIR = "checkpoints"  # inside the run folder
BEST = "best.pt"  # a hard link to the best snapshot's file (survives pruning)
INDEX = "index.json"  # {"snapshots": {name: {"step", metrics...}}, "best": {"file", "step", ...}}
_SNAPSHOT = re.compile(r"^step_(\d{8,})\.pt$")


def checkpoint_dir(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR


def snapshot_name(step: int) -> str:
    """The file name of the snapshot at `step`: step_00001234.pt."""
    return f"step_{step:08d}.pt"


def snapshot_step(name: str) -> int | None:
    """The step of a snapshot file name, None for any other name."""
    match = _SNAPSHOT.match(name)
    return int(match.group(1)) if match else None


def snapshots(run_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """(step, path) of every complete snapshot, oldest first ("latest" is the last)."""
    folder = checkpoint_dir(run_dir)
    if not folder.is_dir():
        return []
    found = [(step, folder / name) for name in os.listdir(folder) if (step := snapshot_step(name)) is not None]
    return sorted(found)


def latest_checkpoint(run_dir: str | os.PathLike[str]) -> Path | None:
    found = snapshots(run_dir)
    return found[-1][1] if found else None


def best_checkpoint(run_dir: str | os.PathLike[str]) -> Path | None:
    path = checkpoint_dir(run_dir) / BEST
    return path if path.exists() else None


def read_index(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The checkpoint index; an empty one when missing or torn (it is rewritten with each save)."""
    try:
        index = json.loads((checkpoint_dir(run_dir) / INDEX).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {"snapshots": {}, "best": None}
    index.setdefault("snapshots", {})
    index.setdefault("best", None)
    return index
