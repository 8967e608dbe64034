"""`train()`: the one entry point for the CLI and the web app (one process or N)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from trainer.cluster import NodePlacement, check_nodes
from trainer.config import ConfigError, TrainConfig
from trainer.distributed import launch
from trainer.engine import StopFlag, prepare, run_rank
from trainer.events import EventLogHandler, Events, Reporter
from trainer.protocol import EXIT_CONFIG, FAILED, STARTING, STATUS, Outcome

log = logging.getLogger("trainer")


def train(
    cfg: TrainConfig,
    *,
    reporter: Reporter | None = None,
    resume: bool = False,
    stop: StopFlag | None = None,
    placement: NodePlacement | None = None,
) -> int:
    """Train `cfg` (already validated), reporting events; returns the exit code (protocol.EXIT_*).
    `placement`: this node's place in a run over several nodes (one node when None).

    The final event is always a `status` with state done | stopped | failed and `exit_code`.
    """
    events = Events(reporter)
    placement = placement or NodePlacement()
    stop = stop or StopFlag()
    split = f", the network split over {cfg.model_parallel} devices per process" if cfg.model_parallel > 1 else ""
    # The dataset folder's name (its id), not its path: this line is shown on the run page.
    events.status(STARTING, f"{cfg.network} on dataset {Path(cfg.data.dataset).name}, devices {cfg.devices}{split}")
    try:
        check_nodes(cfg.nodes, placement)
        prepare(cfg)  # dataset, sizes and network checked before any process starts
    except ConfigError as exc:
        events.status(FAILED, str(exc), exit_code=EXIT_CONFIG)
        return EXIT_CONFIG
    Path(cfg.run_dir).mkdir(parents=True, exist_ok=True)
    if placement.reports:  # one writer on shared storage
        cfg.save(Path(cfg.run_dir) / "config.json")
    in_main_thread = threading.current_thread() is threading.main_thread()
    if in_main_thread:
        stop.install()
    handler = EventLogHandler(events)
    logger = logging.getLogger("trainer")
    previous_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        if cfg.world_size == 1:
            logger.addHandler(handler)
            outcome: Outcome = run_rank(cfg, rank=0, world=1, resume=resume, events=events, stop=stop)
        else:
            outcome = launch(cfg, events=events, resume=resume, stop=stop, placement=placement)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)
        if in_main_thread:
            stop.restore()
    events.emit(STATUS, **outcome.status_fields())
    return outcome.code
